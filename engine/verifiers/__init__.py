"""Verifiers: decide whether a model's completion solves a task.

The same functions serve calibration (Celery workers) and training (a trainer's reward
function); nothing here imports Django::

    from engine.verifiers import verify

    verdict = verify(verifier={"kind": "math"}, completion=text, answer="\\\\frac{3}{4}", prompt=prompt)
    reward = verdict.reward          # 1.0, 0.0, or None when the verifier could not decide

A verifier is ``{"kind": <one of KINDS>, ...config}``; each kind is one ``VerifierKind`` in the registry
(engine/verifiers/registry.py): Passband's own in ``engine/verifiers/kinds/<kind>.py``, installed ones from
the ``passband.verifiers`` entry point; each documents its config there and in docs/verifiers.md.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from typing import Any

from engine.episodes.offered import unoffered_problem
from engine.verifiers.base import (
    DEFAULT_MAX_COMPLETION_CHARS,
    REWARDS,
    Verdict,
    VerifierConfigError,
    completion_size,
    run_check,
)
from engine.verifiers.judges import parse_judges, set_judges
from engine.verifiers.kind import VerifierKind
from engine.verifiers.registry import kind_named, kind_registry

__all__ = [
    "KINDS",
    "Verdict",
    "VerifierConfigError",
    "VerifierKind",
    "audit",
    "configure",
    "kind_of",
    "max_completion_chars",
    "parse_judges",
    "validate_config",
    "verify",
]

_settings = {"max_completion_chars": DEFAULT_MAX_COMPLETION_CHARS}


def configure(*, judges: Mapping[str, Any] | None = None, max_completion_chars: int | None = None) -> None:
    """Process-wide verifier settings (Django feeds them from passband/settings.py).

    judges: the LLM judges that ``llm_judge`` tasks may name, ``{name: {"base_url", "model",
    "api_key_env"}}`` (see engine/verifiers/judges.py); replaces the registry.
    max_completion_chars: completions longer than this (text, or JSON text for structured
    completions) fail without being parsed. Raises ValueError for a bad value.
    """
    if judges is not None:
        set_judges(judges)
        _parse_cached.cache_clear()  # a config naming a judge is valid only while it is registered
    if max_completion_chars is not None:
        if (
            isinstance(max_completion_chars, bool)
            or not isinstance(max_completion_chars, int)
            or max_completion_chars < 1
        ):
            raise ValueError(f"max_completion_chars must be a positive integer, got {max_completion_chars!r}")
        _settings["max_completion_chars"] = max_completion_chars


def max_completion_chars() -> int:
    """The completion size cap in force (``configure``): longer completions fail unparsed."""
    return _settings["max_completion_chars"]


def __getattr__(name: str) -> Any:
    if name == "KINDS":  # the registered kinds' names, built-ins first (installed ones are found on first use)
        return kind_registry().names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kind_of(verifier: Any) -> VerifierKind:
    """The registered kind a verifier config names. Raises VerifierConfigError for anything else."""
    if not isinstance(verifier, Mapping):
        raise VerifierConfigError("verifier", f"must be an object with a 'kind', got {type(verifier).__name__}")
    kind = kind_named(verifier.get("kind"))
    if kind is None:
        known = ", ".join(kind_registry().names())
        raise VerifierConfigError("kind", f"unknown verifier kind {verifier.get('kind')!r}; known kinds: {known}")
    return kind


@functools.lru_cache(maxsize=512)
def _parse_cached(kind: VerifierKind, canonical: str) -> Any:
    return kind.parse_config(json.loads(canonical))


def _parse(verifier: Any) -> tuple[VerifierKind, Any]:
    """The kind and its parsed config. Parsing (compiling tests, checking schemas) is cached by the kind and
    the config's canonical JSON: a campaign verifies one task many times."""
    kind = kind_of(verifier)
    try:
        canonical = json.dumps(verifier, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return kind, kind.parse_config(dict(verifier))
    return kind, _parse_cached(kind, canonical)


def validate_config(verifier: dict[str, Any]) -> None:
    """Check a verifier config at task import time.

    In: ``{"kind": ..., ...config}``. Out: nothing; raises VerifierConfigError whose message
    starts with the offending field (``kind``, ``abs_tol``, ``asserts[2]``...).
    """
    _parse(verifier)


def _run_check(
    kind: VerifierKind, config: Any, *, completion: Any, answer: str | None, prompt: Any, tools: list[Any] | None = None
) -> Verdict:
    problem = unoffered_problem(completion, tools) if tools else ""
    if problem:
        return Verdict(outcome="fail", reward=0.0, detail=problem, latency_ms=0.0)
    return run_check(
        kind,
        config,
        completion=completion,
        answer=answer,
        prompt=prompt,
        max_completion_chars=_settings["max_completion_chars"],
    )


def verify(
    *,
    verifier: dict[str, Any],
    completion: str | list[Any] | dict[str, Any],
    answer: str | None = None,
    prompt: str | list[Any] | None = None,
    tools: list[Any] | None = None,
) -> Verdict:
    """Check one completion.

    In: the task's verifier ``{"kind": ..., ...config}``; the completion (text, a chat message,
    a list of chat messages, or for json/tool_calls a JSON value or tool-call list); the task's
    reference answer; the task's prompt (text or chat messages): ``math`` reads it to refuse an
    answer that only restates the question ("17 + 25" for "What is 17 + 25?"), ``llm_judge`` shows
    it to the judge. Pass it on every path (calibration, training, the API) or verdicts differ.
    ``tools``: the tools the task offers; a completion of tool calls that calls another one fails before
    the kind runs (engine/episodes/offered.py: only offered tools run, and replayed calls are no exception).
    Out: a Verdict (outcome pass/fail/error/timeout, reward 1.0/0.0/None, detail, latency).
    Never raises because of the completion; raises VerifierConfigError for an unknown kind, a
    bad config, or a reference answer the kind needs but did not get.
    """
    kind, config = _parse(verifier)
    return _run_check(kind, config, completion=completion, answer=answer, prompt=prompt, tools=tools)


def verify_many(
    *,
    verifier: dict[str, Any],
    completions: list[Any],
    answer: str | None = None,
    prompt: str | list[Any] | None = None,
    tools: list[Any] | None = None,
) -> list[Verdict]:
    """``verify`` for several completions of one task, in order. A kind that grades many at once
    (``check_many``: repository tasks, as few sandbox runs as fit) does; the verdicts are the ones
    ``verify`` gives one by one, each with its share of the time. Raises as ``verify`` does."""
    kind, config = _parse(verifier)
    check_many = None if tools else kind.check_many  # offered tools are checked one by one, in _run_check
    limit = _settings["max_completion_chars"]
    together = [index for index, completion in enumerate(completions) if completion_size(completion, limit) <= limit]
    if check_many is None or len(together) < 2:
        return [
            _run_check(kind, config, completion=each, answer=answer, prompt=prompt, tools=tools) for each in completions
        ]
    started = time.perf_counter()
    graded = check_many(config, completions=[completions[index] for index in together])
    checks = dict(zip(together, graded, strict=True))
    share = round((time.perf_counter() - started) * 1000.0 / len(together), 3)
    return [
        Verdict(checks[index].outcome, REWARDS.get(checks[index].outcome), checks[index].detail, share)
        if index in checks
        else _run_check(kind, config, completion=completion, answer=answer, prompt=prompt, tools=tools)
        for index, completion in enumerate(completions)
    ]


def audit(
    *,
    verifier: dict[str, Any],
    answer: str | None,
    prompt: str | list[Any] | None = None,
    tools: list[Any] | None = None,
) -> list[str]:
    """Audit a task's verifier before the task is used (``tools``: what the task offers, as for ``verify``).

    Checks that the reference answer passes, that an empty completion fails and, for code,
    that stub solutions (bodies of ``pass`` / ``return None``) fail.
    Out: human-readable problems; an empty list means the audit passed.
    """
    try:
        kind, config = _parse(verifier)
    except VerifierConfigError as error:
        return [f"verifier config: {error}"]
    if kind.audit_task is not None:  # a kind whose audit needs more than pass/fail (repo_tests)
        return list(dict.fromkeys(kind.audit_task(config, answer)))
    problems: list[str] = []
    show_detail = kind.audit_shows_detail

    def why(verdict: Verdict) -> str:
        return f"{verdict.outcome} ({verdict.detail})" if show_detail else verdict.outcome

    def attempt(completion: Any) -> Verdict | None:
        try:
            return _run_check(kind, config, completion=completion, answer=answer, prompt=prompt, tools=tools)
        except VerifierConfigError as error:
            problems.append(f"verifier config: {error}")
            return None

    if answer is None:
        problems.append("no reference answer: nothing shows that this verifier can pass")
    else:
        verdict = attempt(kind.reference_completion(config, answer))
        if verdict is not None and verdict.outcome != "pass":
            problems.append(f"the reference answer does not pass its verifier: {why(verdict)}")
    verdict = attempt("")
    if verdict is not None and verdict.outcome != "fail":
        problems.append(f"an empty completion should fail but gave {why(verdict)}")
    for label, completion in kind.audit_failing_completions(config, answer):
        verdict = attempt(completion)
        if verdict is not None and verdict.outcome != "fail":
            problems.append(f"a {label} solution should fail but gave {why(verdict)}")
    return list(dict.fromkeys(problems))
