"""The weak-test check: how many mutants of a code task's reference solution its tests fail to kill.

A task whose only test is the example in its prompt passes a sound audit (the reference passes, stubs fail)
and meets no impossible variant, yet it pays programs that are wrong almost everywhere. This check mutates the
reference solution (engine/verifiers/mutants.py: one small change each, at most ``MUTANTS``, chosen the same
way every time) and grades each mutant exactly as a completion is graded (``engine.verifiers.verify``: the
code kind, in the sandbox, never in the calling process). A mutant the tests fail, or that crashes, hangs or
runs out of time, is killed; one that passes survived. A sandbox error decides nothing and is counted apart.

Some mutants are equivalent to the reference (``x > 0`` and ``x >= 1`` on integers): no test can kill them.
The share is therefore called "survived", never "bugs"; a task is flagged when its share is above the limit,
a sign, not a proof, of weak tests. docs/verifiers.md ("Weak tests") says how to read it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engine import verifiers
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.kinds import code
from engine.verifiers.mutants import Mutant, mutants_of, reprinted
from engine.verifiers.text import defines_function, extract_python_code

MUTANTS = 20  # at most this many mutants a task
LIMIT = 0.5  # flagged when more than this share of the mutants survived
MIN_MUTANTS = 5  # fewer decided mutants than this say too little to flag
BUDGET_SECONDS = 60.0  # a task's mutants stop being run after this long (the rest are counted as not run)
MUTANT_SECONDS_FLOOR = 1.0  # a mutant's time limit: at least this, at most the task's own limit...
MUTANT_SECONDS_FACTOR = 10.0  # ...and this many times the reference's time
WORKERS = 2  # mutants graded at once (each in its own sandbox process)


@dataclass
class MutationResult:
    """One task's check. ``mutants``: mutants graded pass or fail (timeouts included, as kills);
    ``survived``: the labels of those that passed; ``timed_out``: kills by a time limit; ``errors``: mutants
    the verifier could not decide; ``not_run``: mutants left when the time budget ran out; ``reason``: why
    nothing ran ("" when it did)."""

    mutants: int = 0
    survived: list[str] = field(default_factory=list)
    timed_out: int = 0
    errors: int = 0
    not_run: int = 0
    reason: str = ""
    limit: float = LIMIT
    seconds: float = 0.0

    @property
    def survived_share(self) -> float | None:
        return len(self.survived) / self.mutants if self.mutants else None

    @property
    def flagged(self) -> bool:
        share = self.survived_share
        return share is not None and self.mutants >= MIN_MUTANTS and share > self.limit

    def as_dict(self) -> dict[str, Any]:
        return {
            "mutants": self.mutants,
            "survived": len(self.survived),
            "survived_share": self.survived_share,
            "survivors": list(self.survived),
            "timed_out": self.timed_out,
            "errors": self.errors,
            "not_run": self.not_run,
            "reason": self.reason,
            "flagged": self.flagged,
            "limit": self.limit,
            "seconds": round(self.seconds, 3),
        }


def applies_to(verifier: Any) -> bool:
    """Whether the check can run on a task with this verifier config (the ``code`` kind only)."""
    return isinstance(verifier, dict) and verifier.get("kind") == code.KIND


def _program_and_first_line(config: code.CodeConfig, answer: str) -> tuple[str, int]:
    """The whole reference program and the first line that is the answer's own (a HumanEval body is mutated
    inside its code_prefix, whose lines stay as they are)."""
    if config.style == "humaneval" and config.code_prefix and not defines_function(answer, config.entry_point):
        return config.code_prefix + answer, config.code_prefix.count("\n") + 1
    return answer, 1


def weak_tests_check(
    *,
    verifier: dict[str, Any],
    answer: str | None,
    prompt: Any = None,
    tools: list[Any] | None = None,
    mutants: int = MUTANTS,
    limit: float = LIMIT,
    budget_seconds: float = BUDGET_SECONDS,
) -> MutationResult | None:
    """Mutate the reference answer of a ``code`` task and grade each mutant with the task's own verifier.

    In: the task's verifier config, reference answer, prompt and offered tools; at most `mutants` mutants,
    the flag `limit` on the survived share, and a time budget for the whole task. Out: None when the check
    does not apply (another kind); else a MutationResult, with ``reason`` set when nothing could run (a bad
    config, no reference, a reference that is not Python or does not pass as re-printed).
    """
    if not applies_to(verifier):
        return None
    started = time.perf_counter()
    result = MutationResult(limit=limit)
    try:
        config = code.parse_config(dict(verifier))
    except VerifierConfigError as error:
        result.reason = f"verifier config: {error}"
        return result
    if not answer or not answer.strip():
        result.reason = "no reference answer to mutate"
        return result
    # The program as the verifier reads it from a completion (a reference in ```python fences is fine).
    program, first_line = _program_and_first_line(
        config, extract_python_code(answer, entry_point=config.entry_point or None)
    )
    try:
        chosen = mutants_of(program, limit=mutants, first_line=first_line)
        control = reprinted(program)
    except (SyntaxError, ValueError, RecursionError) as error:
        result.reason = f"the reference answer is not a Python program that can be mutated ({error})"
        return result
    control_started = time.perf_counter()
    verdict = verifiers.verify(verifier=verifier, completion=control, answer=answer, prompt=prompt, tools=tools)
    if verdict.outcome != "pass":
        result.reason = f"the reference answer, re-printed, does not pass: {verdict.outcome} ({verdict.detail})"
        return result
    _grade(
        chosen,
        result=result,
        verifier=_bounded(verifier, config=config, reference_seconds=time.perf_counter() - control_started),
        answer=answer,
        prompt=prompt,
        tools=tools,
        deadline=started + budget_seconds,
    )
    result.seconds = time.perf_counter() - started
    return result


def _bounded(verifier: dict[str, Any], *, config: code.CodeConfig, reference_seconds: float) -> dict[str, Any]:
    """The verifier config with a mutant's time limit: a mutant that loops forever is killed sooner than the
    task's own limit would (never later)."""
    seconds = max(MUTANT_SECONDS_FLOOR, MUTANT_SECONDS_FACTOR * reference_seconds)
    wall = min(config.limits.wall_seconds, seconds)
    return {**verifier, "timeout_seconds": wall, "cpu_seconds": min(config.limits.cpu_seconds, wall)}


def _grade(
    chosen: list[Mutant],
    *,
    result: MutationResult,
    verifier: dict[str, Any],
    answer: str,
    prompt: Any,
    tools: list[Any] | None,
    deadline: float,
) -> None:
    """Grade the mutants, WORKERS at a time (each waits on its own sandbox run), in order into `result`."""

    def outcome(mutant: Mutant) -> str | None:
        if time.perf_counter() > deadline:
            return None
        return verifiers.verify(
            verifier=verifier, completion=mutant.source, answer=answer, prompt=prompt, tools=tools
        ).outcome

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = list(pool.map(outcome, chosen))
    for mutant, graded in zip(chosen, outcomes, strict=True):
        if graded is None:
            result.not_run += 1
        elif graded == "error":
            result.errors += 1
        else:
            result.mutants += 1
            result.timed_out += graded == "timeout"
            if graded == "pass":
                result.survived.append(mutant.label)
