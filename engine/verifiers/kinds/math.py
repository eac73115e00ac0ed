"""``math``: the final answer of a (possibly long) chain of thought equals the reference answer
mathematically, through math-verify.

Config (all optional)::

    {"kind": "math",
     "timeout_seconds": 5,           # per verification
     "max_completion_chars": 10000,  # only the tail is read: the final answer is at the end
     "float_rounding": 6,            # math-verify: decimals kept when comparing floats
     "numeric_precision": 15,        # math-verify: significant digits for numeric comparison
     "strict": true,                 # math-verify: variables matter; sets and tuples differ
     "boxed_first": true,            # prefer the last \\boxed{} over other answer patterns
     "extraction": ["latex", "expr"], # where answers are looked for: LaTeX, plain expressions
     "allow_set_relation_comp": false, # math-verify: a set reference matches an inequality answer
     "units": "strict",              # "strict": a unit or percent sign is part of the value; "ignore"
     "isolation": "process"}         # "process" ("auto", its former default, is read as "process")

The reference answer is the task's answer, LaTeX or plain (``\\frac{3}{4}``, ``0.75``,
``\\{1, 2\\}``, ``[0, 1)``, ``(1, 2, 3)``, ``x^2+1``); it is read as math even without ``$``.
math-verify handles LaTeX, \\boxed{}, fractions, roots, sets, intervals, tuples, expressions.

Every comparison runs in a helper process (``math_worker.py``) that is killed one second after
the deadline, so nothing a completion contains (``10^{10^{10}}``, ``\\left(9\\right)^{9^{9}}``, a
giant factorial) can hold the calling thread or its GIL past the limit plus one second; a killed
helper is replaced on the next call. This works in Celery prefork and threaded pools alike
(math-verify's own signal-based timeouts are disabled: they only work in a main thread).

Beyond math-verify's equivalence (the rules are in ``math_answer.py``): in ``name = value`` the
last side is the value (``P(A\\mid B)=1/3``, ``A\\cap B=\\{2\\}``, a limit written as an equation);
a side that only restates an expression from the question (``2 + 6`` for "What is 2 + 6?") is not
a value; a value that joins values with an operator the reference does not use (``41 \\lor 42``,
``\\vee``, ``|``...) fails, since math-verify would read it as its last value; set operators are
fine in a set (``\\{1\\}\\cup\\{2\\}``); and when the reference is one value, an answer giving several
(``x=2 or x=3``) or a range (``1 \\le x \\le 100``) fails.

When the reference is a number, the completion's committed answer (answer_span.committed: a box, an
answer tag, "the answer is", the last line) must state it: not negated, not hedged, not an unworked
expression (``6*7``, ``12 + 22``), a number word counting as its number, and a unit or percent sign
part of the value unless ``units`` is ``"ignore"``. Other references are read by math-verify, after the
same check that the answer is not negated or hedged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sandbox.worker_pool import HelperScript, WorkerFailed, WorkerPool, WorkerTimeout
from engine.verifiers.answer_value import UNIT_MODES
from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    timed_out,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.text import completion_text, prompt_text

KIND = "math"
WORKER_SCRIPT = Path(__file__).resolve().parent.parent / "math_worker.py"
WORKER_MEMORY_BYTES = 2 << 30
HARD_LIMIT_GRACE_SECONDS = 1.0
ISOLATION_MODES = ("auto", "process")
EXTRACTION_TARGETS = ("latex", "expr")
PROMPT_CHARS = 20_000

# What can keep sympy inside one long C call (or allocate gigabytes). Every answer goes to the
# helper now; the screen remains for callers that want to know what is risky.
_NEEDS_PROCESS = re.compile(
    r"""
      \^\s*\{[^{}$]*\^                  # a power inside an exponent: 10^{10^{10}}
    | \^\s*[\w(]+\s*\^                   # chained powers: 2^3^4
    | \^\s*\{?\s*\(?\s*[-+]?\d{3,}        # an exponent of 100 or more
    | \*\*                                # Python-style powers
    | [\w})\]]\s*!(?!=)                   # factorials (not !=)
    | \\(?:[dt]?binom|choose|i*int|oint|sum|prod|lim|Gamma|zeta|begin|operatorname)
    | \d{30,}                              # huge literal numbers
    """,
    re.VERBOSE,
)
# Expressions with this many operators take sympy long enough to prefer the helper.
_MAX_OPERATORS_IN_THREAD = 300


@dataclass(frozen=True)
class MathConfig:
    timeout_seconds: float
    max_completion_chars: int
    float_rounding: int
    numeric_precision: int
    strict: bool
    boxed_first: bool
    isolation: str
    extraction: tuple[str, ...]
    allow_set_relation_comp: bool
    units: str


def parse_config(raw: dict[str, Any]) -> MathConfig:
    reader = ConfigReader(raw, kind=KIND)
    config = MathConfig(
        timeout_seconds=reader.number("timeout_seconds", 5.0, minimum=0, maximum=120, exclusive_minimum=True),
        max_completion_chars=reader.integer("max_completion_chars", 10_000, minimum=100, maximum=1_000_000),
        float_rounding=reader.integer("float_rounding", 6, minimum=0, maximum=50),
        numeric_precision=reader.integer("numeric_precision", 15, minimum=1, maximum=1000),
        strict=reader.boolean("strict", True),
        boxed_first=reader.boolean("boxed_first", True),
        isolation=reader.string("isolation", "process", choices=ISOLATION_MODES),
        extraction=_extraction_targets(reader),
        allow_set_relation_comp=reader.boolean("allow_set_relation_comp", False),
        units=reader.string("units", "strict", choices=UNIT_MODES),
    )
    reader.finish()
    return config


def _extraction_targets(reader: ConfigReader) -> tuple[str, ...]:
    targets = reader.string_list("extraction", list(EXTRACTION_TARGETS), non_empty=True)
    unknown = [target for target in targets if target not in EXTRACTION_TARGETS]
    if unknown:
        raise VerifierConfigError("extraction", f"unknown target {unknown[0]!r}; known: latex, expr")
    return tuple(dict.fromkeys(targets))


_helpers = HelperScript(WORKER_SCRIPT, memory_bytes=WORKER_MEMORY_BYTES)


def worker_pool() -> WorkerPool:
    """The process-wide pool of math helpers (at most one per CPU, started on demand)."""
    return _helpers.pool()


def needs_process(text: str) -> bool:
    """Whether comparing this text could run away in C (see _NEEDS_PROCESS)."""
    if _NEEDS_PROCESS.search(text):
        return True
    return sum(text.count(operator) for operator in "+-*/^") > _MAX_OPERATORS_IN_THREAD


def check(config: MathConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    if answer is None or not str(answer).strip():
        raise VerifierConfigError("answer", "the math verifier needs the task's reference answer")
    text = completion_text(completion)
    truncated = len(text) > config.max_completion_chars
    if truncated:
        text = text[-config.max_completion_chars :]
    reference = str(answer)[: config.max_completion_chars]
    request = {
        "answer": reference,
        "completion": text,
        "prompt": prompt_text(prompt)[:PROMPT_CHARS],
        "timeout_seconds": config.timeout_seconds,
        "float_rounding": config.float_rounding,
        "numeric_precision": config.numeric_precision,
        "strict": config.strict,
        "boxed_first": config.boxed_first,
        "extraction": list(config.extraction),
        "allow_set_relation_comp": config.allow_set_relation_comp,
        "units": config.units,
    }
    result = _in_helper_process(request, config)
    if truncated and result.outcome in ("pass", "fail"):
        result = Check(result.outcome, f"{result.detail} (read the last {config.max_completion_chars} characters)")
    return result


def _in_helper_process(request: dict[str, Any], config: MathConfig) -> Check:
    try:
        response = worker_pool().call(request, timeout=config.timeout_seconds + HARD_LIMIT_GRACE_SECONDS)
    except WorkerTimeout:
        return timed_out(f"math verification exceeded {config.timeout_seconds:g}s; helper process killed")
    except WorkerFailed as error:
        return errored(f"math helper process failed: {error}")
    return Check(str(response.get("outcome", "error")), str(response.get("detail", "")))


def reference_completion(config: MathConfig, answer: str) -> str:
    """The reference answer stated the way a model would, for the task audit: boxed."""
    if any(marker in answer for marker in ("$", "\\boxed", "\\(", "\\[")):
        return answer
    return f"The final answer is $\\boxed{{{answer}}}$."


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    reference_completion=reference_completion,
    batchable=True,
    gameability="text",
    exports=KindExports(),
    examples=(
        KindExample(
            {"kind": KIND},
            passing="Three quarters: $\\boxed{\\frac{3}{4}}$",
            failing="$\\boxed{\\frac{1}{2}}$",
            answer="3/4",
            prompt="What is 1/2 + 1/4?",
        ),
    ),
)
