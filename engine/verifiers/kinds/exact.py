"""``exact``: the completion (or an extracted part of it) equals the reference answer.

Config (all optional)::

    {"kind": "exact",
     "ignore_case": false,          # compare case-insensitively
     "whitespace": "strip",         # "exact" | "strip" (ends) | "collapse" (runs -> one space,
                                    #  ends stripped) | "remove" (all whitespace dropped)
     "extract": "whole",            # "whole" | "last_line" | "boxed" (last \\boxed{}) |
                                    #  "answer_tag" (last <answer>...</answer>)
     "answers": ["Paris", "paris, france"]}   # accepted answers; default: the task's answer
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    failed,
    passed,
    shorten,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.text import (
    answer_tag_contents,
    boxed_contents,
    completion_text,
    last_nonempty_line,
)

KIND = "exact"
WHITESPACE_MODES = ("exact", "strip", "collapse", "remove")
EXTRACT_MODES = ("whole", "last_line", "boxed", "answer_tag")


@dataclass(frozen=True)
class ExactConfig:
    ignore_case: bool
    whitespace: str
    extract: str
    answers: tuple[str, ...]


def parse_config(raw: dict[str, Any]) -> ExactConfig:
    reader = ConfigReader(raw, kind=KIND)
    config = ExactConfig(
        ignore_case=reader.boolean("ignore_case", False),
        whitespace=reader.string("whitespace", "strip", choices=WHITESPACE_MODES),
        extract=reader.string("extract", "whole", choices=EXTRACT_MODES),
        answers=tuple(reader.string_list("answers", [])),
    )
    reader.finish()
    return config


def normalize(text: str, *, whitespace: str, ignore_case: bool) -> str:
    if whitespace == "strip":
        text = text.strip()
    elif whitespace == "collapse":
        text = re.sub(r"\s+", " ", text).strip()
    elif whitespace == "remove":
        text = re.sub(r"\s+", "", text)
    return text.casefold() if ignore_case else text


def extract_candidate(text: str, mode: str) -> str | None:
    """The part of the completion to compare, or None when the requested part is absent."""
    if mode == "whole":
        return text
    if mode == "last_line":
        return last_nonempty_line(text)
    found = boxed_contents(text) if mode == "boxed" else answer_tag_contents(text)
    return found[-1] if found else None


def check(config: ExactConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    accepted = list(config.answers) or ([answer] if answer is not None else [])
    if not accepted:
        raise VerifierConfigError("answer", "the exact verifier needs the task's reference answer or config 'answers'")
    candidate = extract_candidate(completion_text(completion), config.extract)
    if candidate is None:
        return failed(f"no {config.extract.replace('_', ' ')} answer found")
    normalized = normalize(candidate, whitespace=config.whitespace, ignore_case=config.ignore_case)
    for expected in accepted:
        if normalized == normalize(expected, whitespace=config.whitespace, ignore_case=config.ignore_case):
            return passed(f"answer {shorten(candidate, 80)!r} matches")
    return failed(f"answer {shorten(candidate, 80)!r} != expected {shorten(accepted[0], 80)!r}")


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    batchable=True,
    gameability="text",
    exports=KindExports(),
    examples=(KindExample({"kind": KIND, "ignore_case": True}, passing="paris", failing="Lyon", answer="Paris"),),
)
