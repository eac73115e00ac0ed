"""``word_count``: the answer's length in words lies between ``min`` and ``max``.

Config::

    {"kind": "word_count",
     "min": 1,                      # fewest words (default 1)
     "max": 5,                      # most words (required)
     "same_first_word": false}      # the first word must equal the reference answer's (case-insensitive)

The completion is text or a chat message; words are runs of non-space characters.
"""

from __future__ import annotations

from engine.verifiers.base import Check, ConfigReader, VerifierConfigError
from engine.verifiers.kind import KindExample, KindExports, VerifierKind

NAME = "word_count"


def parse_config(raw):
    reader = ConfigReader(raw, kind=NAME)
    low = reader.integer("min", 1, minimum=0)
    high = reader.integer("max", minimum=1)
    same_first_word = reader.boolean("same_first_word", False)
    reader.finish()
    if low > high:
        raise VerifierConfigError("min", f"must be at most max ({high}), got {low}")
    return (low, high, same_first_word)


def _text(completion) -> str:
    if isinstance(completion, dict):
        completion = completion.get("content")
    return completion if isinstance(completion, str) else ""


def check(config, *, completion, answer, prompt=None):
    low, high, same_first_word = config
    words = _text(completion).split()
    if same_first_word:
        if not answer or not answer.split():
            raise VerifierConfigError("answer", "same_first_word needs the task's reference answer")
        if not words or words[0].casefold() != answer.split()[0].casefold():
            return Check("fail", f"starts with {words[0] if words else 'nothing'!r}, not {answer.split()[0]!r}")
    if low <= len(words) <= high:
        return Check("pass", f"{len(words)} words")
    return Check("fail", f"{len(words)} words, not {low} to {high}")


def audit_failing_completions(config, answer):
    low, high, _ = config
    return [("one word too many", " ".join(["word"] * (high + 1)))]


VERIFIER_KIND = VerifierKind(
    name=NAME,
    parse_config=parse_config,
    check=check,
    audit_failing_completions=audit_failing_completions,
    batchable=True,
    gameability="empty",
    exports=KindExports(package="passband-example-verifier"),
    examples=(
        KindExample(
            {"kind": NAME, "min": 2, "max": 4, "same_first_word": True},
            passing="Paris is lovely",
            failing="Paris is lovely in the spring",
            answer="Paris France",
        ),
        KindExample({"kind": NAME, "max": 3}, passing="three small words", failing="", answer="two words"),
    ),
)
