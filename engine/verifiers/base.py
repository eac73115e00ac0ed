"""Types shared by every verifier kind: the verdict, the config error, and a typed config reader.

Nothing here imports Django: trainers import this package directly.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

logger = logging.getLogger("engine.verifiers")

OUTCOMES = ("pass", "fail", "error", "timeout", "tampered")


@dataclass(frozen=True)
class Verdict:
    """The result of checking one completion.

    outcome: "pass" | "fail" | "error" | "timeout" | "tampered". Only pass and fail are evidence about
    the model; "tampered" (the answer subverted the grading) is never a pass and flags the task.
    reward: 1.0 for pass, 0.0 for fail and tampered, None for error and timeout (never 0: they say nothing).
    detail: short human-readable reason (which test failed, what answer was extracted).
    latency_ms: wall time spent verifying.
    """

    outcome: str
    reward: float | None
    detail: str
    latency_ms: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict with the four fields."""
        return {
            "outcome": self.outcome,
            "reward": self.reward,
            "detail": self.detail,
            "latency_ms": self.latency_ms,
        }


class VerifierConfigError(ValueError):
    """A verifier config (or a task field it depends on) is unusable.

    The message starts with the offending field, e.g. ``abs_tol: must be a number >= 0, got -1``;
    ``field`` holds that name for callers that want to point at it in a form.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class Check(NamedTuple):
    """What a kind's ``check`` returns; ``verify`` adds the reward and latency."""

    outcome: str
    detail: str


def passed(detail: str) -> Check:
    return Check("pass", detail)


def failed(detail: str) -> Check:
    return Check("fail", detail)


def errored(detail: str) -> Check:
    return Check("error", detail)


def timed_out(detail: str) -> Check:
    return Check("timeout", detail)


def shorten(text: str, limit: int = 160) -> str:
    """One-line excerpt for details: newlines shown as \\n, long text cut in the middle."""
    text = text.replace("\r", "").replace("\n", "\\n")
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


_MISSING: Any = object()


class ConfigReader:
    """Reads typed fields from a raw verifier config and rejects unknown ones.

    Every accessor raises VerifierConfigError naming the field. Call ``finish()`` after reading
    all fields so that a typo (``ignorecase``) is reported instead of silently ignored.
    """

    def __init__(self, raw: Mapping[str, Any], *, kind: str) -> None:
        if not isinstance(raw, Mapping):
            raise VerifierConfigError("verifier", f"must be a JSON object, got {type(raw).__name__}")
        self.raw = raw
        self.kind = kind
        self._read: set[str] = {"kind"}

    def _get(self, name: str, default: Any) -> Any:
        self._read.add(name)
        if name in self.raw and self.raw[name] is not None:
            return self.raw[name]
        if default is _MISSING:
            raise VerifierConfigError(name, f"is required for kind '{self.kind}'")
        return default

    def has(self, name: str) -> bool:
        return self.raw.get(name) is not None

    def value(self, name: str, default: Any = _MISSING) -> Any:
        """The raw value, for fields a kind validates itself."""
        return self._get(name, default)

    def string(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        choices: tuple[str, ...] | None = None,
        non_empty: bool = False,
    ) -> str:
        value = self._get(name, default)
        if not isinstance(value, str):
            raise VerifierConfigError(name, f"must be a string, got {_describe(value)}")
        if choices is not None and value not in choices:
            options = ", ".join(repr(choice) for choice in choices)
            raise VerifierConfigError(name, f"must be one of {options}, got {value!r}")
        if non_empty and not value.strip():
            raise VerifierConfigError(name, "must not be empty")
        return value

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        value = self._get(name, default)
        if not isinstance(value, bool):
            raise VerifierConfigError(name, f"must be true or false, got {_describe(value)}")
        return value

    def number(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: bool = False,
    ) -> float:
        value = self._get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise VerifierConfigError(name, f"must be a finite number, got {_describe(value)}")
        if minimum is not None:
            if exclusive_minimum and value <= minimum:
                raise VerifierConfigError(name, f"must be a number > {minimum:g}, got {value!r}")
            if not exclusive_minimum and value < minimum:
                raise VerifierConfigError(name, f"must be a number >= {minimum:g}, got {value!r}")
        if maximum is not None and value > maximum:
            raise VerifierConfigError(name, f"must be a number <= {maximum:g}, got {value!r}")
        return float(value)

    def integer(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        value = self._get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise VerifierConfigError(name, f"must be an integer, got {_describe(value)}")
        if minimum is not None and value < minimum:
            raise VerifierConfigError(name, f"must be an integer >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise VerifierConfigError(name, f"must be an integer <= {maximum}, got {value}")
        return value

    def string_list(self, name: str, default: Any = _MISSING, *, non_empty: bool = False) -> list[str]:
        value = self._get(name, default)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise VerifierConfigError(name, f"must be a list of strings, got {_describe(value)}")
        if non_empty and not value:
            raise VerifierConfigError(name, "must not be empty")
        return list(value)

    def mapping(self, name: str, default: Any = _MISSING) -> dict[str, Any]:
        value = self._get(name, default)
        if not isinstance(value, Mapping):
            raise VerifierConfigError(name, f"must be a JSON object, got {_describe(value)}")
        return dict(value)

    def list_of_mappings(self, name: str, default: Any = _MISSING, *, non_empty: bool = False) -> list[dict[str, Any]]:
        value = self._get(name, default)
        if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
            raise VerifierConfigError(name, f"must be a list of JSON objects, got {_describe(value)}")
        if non_empty and not value:
            raise VerifierConfigError(name, "must not be empty")
        return [dict(item) for item in value]

    def finish(self) -> None:
        unknown = sorted(set(self.raw) - self._read)
        if unknown:
            known = ", ".join(sorted(self._read - {"kind"}))
            raise VerifierConfigError(unknown[0], f"unknown field for kind '{self.kind}' (known fields: {known})")


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"string {shorten(value, 40)!r}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return type(value).__name__


# -- running one kind's check --------------------------------------------------------------------

REWARDS = {"pass": 1.0, "fail": 0.0, "tampered": 0.0}
DEFAULT_MAX_COMPLETION_CHARS = 1_000_000


def completion_size(completion: Any, limit: int) -> int:
    """Characters of the completion as text (JSON text for structured ones), at most limit + 1."""
    if completion is None:
        return 0
    if isinstance(completion, str):
        return len(completion)
    try:
        return len(json.dumps(completion, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return limit + 1


def run_check(
    kind: Any, config: Any, *, completion: Any, answer: str | None, prompt: Any, max_completion_chars: int
) -> Verdict:
    """``kind.check`` (a VerifierKind, engine/verifiers/kind.py) on one completion, as ``verify`` runs it: the
    door every kind goes through. A completion over ``max_completion_chars`` fails unparsed; a crash of the
    check is an ``error``, and so is an answer that is not one of OUTCOMES. Out: the Verdict.
    Here rather than in ``engine.verifiers`` so that a Harbor task folder's copy of the ``code`` kind
    (engine/integrations/harbor_code.py) runs it without importing every kind."""
    started = time.perf_counter()
    size = completion_size(completion, max_completion_chars)
    try:
        if size > max_completion_chars:
            # Checked before any parsing: no kind's cost may grow with an unbounded completion.
            result = Check("fail", f"completion has {size} characters, over the limit of {max_completion_chars}")
        else:
            result = _well_formed(kind, kind.check(config, completion=completion, answer=answer, prompt=prompt))
    except VerifierConfigError:
        raise
    except RecursionError:
        result = Check("fail", "completion nested too deeply to check")
    except Exception as error:
        logger.exception("verifier %s crashed", kind.name)
        result = Check("error", f"verifier crashed: {type(error).__name__}: {shorten(str(error), 120)}")
    latency_ms = (time.perf_counter() - started) * 1000.0
    return Verdict(
        outcome=result.outcome,
        reward=REWARDS.get(result.outcome),
        detail=result.detail,
        latency_ms=round(latency_ms, 3),
    )


def _well_formed(kind: Any, result: Any) -> Check:
    """The kind's answer as a Check; anything but (one of OUTCOMES, text) is the kind's error, never a verdict."""
    if isinstance(result, tuple) and len(result) == 2 and result[0] in OUTCOMES and isinstance(result[1], str):
        return Check(result[0], result[1])
    logger.error("verifier %s returned %r, not a Check", kind.name, result)
    return Check("error", f"verifier {kind.name} returned {shorten(repr(result), 80)}, not a Check")
