"""Why a task is too hard: a verifier that refuses right answers, a completion budget that cuts the
model off, or a task that is hard.

``diagnose`` reads the stored attempts of one task under one model (their texts, verdicts and finish
reasons) and returns one of:

- ``suspect_verifier``: a refused completion committed to the reference value, judged by a reader
  independent of the verifier (engine/verifiers/answer_span.py: its own extraction; numbers compared
  exactly as fractions, words as text, other math through math-verify on the span alone), or the
  reference answer, written where the model wrote its answer, is refused by the task's verifier in
  at least half of the refused completions that state an answer (the verifier cannot read the
  model's answer format, so no attempt could have passed);
- ``truncated``: more than half of the attempts stopped at the completion budget (max tokens);
- ``hard``: neither.

Only refused (``fail``) completions that ran to their end are read for the verifier checks: a cut-off
completion has not committed to anything, and an ``error`` or ``timeout`` is the verifier's trouble,
already flagged by calibration. The answer-reading kinds (exact, numeric, math, regex) with a
reference answer get the verifier checks; other kinds can only be truncated or hard.

No Django: the calibration service calls it where it assigns a band, and a trainer can too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.verifiers import answer_span
from engine.verifiers.base import VerifierConfigError, shorten

SUSPECT_VERIFIER, TRUNCATED, HARD = "suspect_verifier", "truncated", "hard"
DIAGNOSES = (SUSPECT_VERIFIER, TRUNCATED, HARD)
ANSWER_KINDS = ("exact", "numeric", "math", "regex")
# "Most attempts hit max tokens."
TRUNCATED_SHARE = 0.5
# The reference, written in the model's format, refused in at least this share of the answers read.
FORMAT_REFUSED_SHARE = 0.5
# Refused completions read per diagnosis (the latest first): each costs up to two verifier calls.
MAX_READ = 64
MAX_EXAMPLES = 3
EXCERPT_CHARS = 240


@dataclass(frozen=True)
class Attempt:
    """One stored attempt: its id (for links), text, verdict (pass, fail, error, timeout) and whether it
    stopped at the completion budget (``finish_reason == "length"`` or flagged truncated)."""

    id: int | None
    text: str
    outcome: str
    truncated: bool = False


@dataclass
class Diagnosis:
    """``diagnosis``: one of DIAGNOSES. ``evidence``: JSON-ready counts and examples, see ``diagnose``."""

    diagnosis: str
    evidence: dict[str, Any] = field(default_factory=dict)


def _excerpt(text: str, start: int, end: int) -> str:
    """The text around an answer, at most EXCERPT_CHARS, the answer near its end."""
    begin = max(0, end - EXCERPT_CHARS + 40)
    excerpt = text[begin : min(len(text), end + 40)]
    return ("..." if begin else "") + excerpt + ("..." if end + 40 < len(text) else "")


def _references(verifier: Mapping[str, Any], answer: str | None) -> list[str]:
    accepted = [str(item) for item in verifier.get("answers") or [] if str(item).strip()]
    if answer is not None and str(answer).strip():
        accepted.append(str(answer))
    return list(dict.fromkeys(accepted))


def _balanced(text: str) -> bool:
    depth = 0
    for character in text:
        depth += {"{": 1, "}": -1}.get(character, 0)
        if depth < 0:
            return False
    return depth == 0


def _math_equal(span: str, reference: str, prompt: Any) -> bool:
    """math-verify's equality on the span alone (in its killable helper), with Passband's hedge rules.
    A span that could leave its box (unbalanced braces, a box or ``$`` of its own) is never equal."""
    from engine.verifiers import verify

    if not _balanced(span) or "$" in span or "\\boxed" in span or "\\fbox" in span:
        return False
    try:
        verdict = verify(verifier={"kind": "math"}, completion=f"$\\boxed{{{span}}}$", answer=reference, prompt=prompt)
    except VerifierConfigError:
        return False
    return verdict.outcome == "pass"


def answer_is_reference(span: answer_span.Span, references: list[str], prompt: Any = None) -> str:
    """The reference a committed, non-hedging answer has the value of, or ""."""
    if span.hedge:
        return ""
    for reference in references:
        match = answer_span.same_value(span.text, reference)
        equal = match.equal if match.equal is not None else _math_equal(span.text, reference, prompt)
        if equal:
            return reference
    return ""


def diagnose(
    *,
    verifier: Mapping[str, Any],
    answer: str | None,
    prompt: Any,
    attempts: Iterable[Attempt],
) -> Diagnosis:
    """Diagnose a too_hard task (the module's rules) from its attempts, in any order (the highest ids
    are read first).

    Evidence: ``attempts`` (all given), ``truncated`` (how many stopped at the budget), ``read`` (refused
    completions read for the verifier checks), ``refused_right`` (refused although their committed
    answer has the reference value), ``answers_read`` and ``format_refused`` (the reference written in
    their format, refused too), ``examples`` (up to MAX_EXAMPLES per finding: rollout id, what it shows,
    the answer, an excerpt, the verifier's detail) and ``reason``, a sentence for people.
    """
    attempts = list(attempts)
    truncated = sum(1 for attempt in attempts if attempt.truncated)
    evidence: dict[str, Any] = {
        "attempts": len(attempts),
        "truncated": truncated,
        "read": 0,
        "refused_right": 0,
        "answers_read": 0,
        "format_refused": 0,
        "examples": [],
    }
    kind = verifier.get("kind") if isinstance(verifier, Mapping) else None
    references = _references(verifier, answer) if kind in ANSWER_KINDS else []
    if references:
        _read_refusals(
            verifier=verifier, answer=answer, references=references, prompt=prompt, attempts=attempts, evidence=evidence
        )
    answers_read, format_refused = evidence["answers_read"], evidence["format_refused"]
    if evidence["refused_right"]:
        evidence["reason"] = (
            f"{evidence['refused_right']} of {evidence['read']} refused completions gave the reference value "
            "as their final answer: check the verifier's extraction and notation."
        )
        return Diagnosis(SUSPECT_VERIFIER, evidence)
    if answers_read and format_refused >= FORMAT_REFUSED_SHARE * answers_read:
        evidence["reason"] = (
            f"the reference answer, written where the model wrote its answer, is refused in {format_refused} of "
            f"{answers_read} completions: the verifier cannot read the model's answer format."
        )
        return Diagnosis(SUSPECT_VERIFIER, evidence)
    if attempts and truncated > TRUNCATED_SHARE * len(attempts):
        evidence["reason"] = (
            f"{truncated} of {len(attempts)} attempts stopped at the completion budget: raise max new tokens."
        )
        cut_off = [attempt for attempt in sorted(attempts, key=_latest_first) if attempt.truncated]
        evidence["examples"] += [
            {
                "rollout": attempt.id,
                "shows": TRUNCATED,
                "excerpt": _excerpt(attempt.text, len(attempt.text), len(attempt.text)),
            }
            for attempt in cut_off[:MAX_EXAMPLES]
        ]
        return Diagnosis(TRUNCATED, evidence)
    evidence["reason"] = "no refused completion gave the reference answer, and most attempts finished."
    return Diagnosis(HARD, evidence)


def _latest_first(attempt: Attempt) -> int:
    return -(attempt.id or 0)


def _read_refusals(
    *,
    verifier: Mapping[str, Any],
    answer: str | None,
    references: list[str],
    prompt: Any,
    attempts: list[Attempt],
    evidence: dict,
) -> None:
    """Count, in evidence, the refused completions that had the right value or a format the verifier
    cannot read, with examples of each."""
    from engine.verifiers import verify

    refused = [attempt for attempt in attempts if attempt.outcome == "fail" and not attempt.truncated]
    examples: dict[str, list[dict]] = {"refused_right": [], "format_refused": []}
    for attempt in sorted(refused, key=_latest_first)[:MAX_READ]:
        evidence["read"] += 1
        span = answer_span.final_answer(attempt.text)
        if span is None or span.hedge:
            continue
        example = {
            "rollout": attempt.id,
            "answer": shorten(span.text, 80),
            "excerpt": _excerpt(attempt.text, span.start, span.end),
        }
        if answer_is_reference(span, references, prompt):
            evidence["refused_right"] += 1
            examples["refused_right"].append({**example, "shows": "refused_right"})
        evidence["answers_read"] += 1
        rewritten = answer_span.written_like(answer if answer else references[0], span, attempt.text)
        try:
            verdict = verify(verifier=dict(verifier), completion=rewritten, answer=answer, prompt=prompt)
        except VerifierConfigError:
            continue
        if verdict.outcome == "fail":
            evidence["format_refused"] += 1
            if rewritten == attempt.text:
                continue  # it already wrote the reference there: the refused_right example shows it
            rewritten_end = span.end + len(rewritten) - len(attempt.text)
            examples["format_refused"].append(
                {
                    **example,
                    "shows": "format_refused",
                    "rewritten": _excerpt(rewritten, span.start, rewritten_end),
                    "detail": shorten(verdict.detail, 160),
                }
            )
    evidence["examples"] = examples["refused_right"][:MAX_EXAMPLES] + examples["format_refused"][:MAX_EXAMPLES]
