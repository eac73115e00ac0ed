"""``numeric``: the number in the completion equals the reference number within a tolerance.

Config (all optional)::

    {"kind": "numeric",
     "abs_tol": 1e-6,        # pass when |got - expected| <= abs_tol ...
     "rel_tol": 1e-6,        # ... or when |got - expected| <= rel_tol * |expected|
     "extract": "last"}      # "last": the last \\boxed{} if any, else the last number in the text
                             #         (a chain of thought ends with its answer);
                             # "whole": the whole completion must be one number

Numbers are read as written by people and models: ``1,000`` (thousands separators), ``1e3``,
``.5``, ``-3``, ``3/4`` and ``\\frac{3}{4}``, an optional currency sign before and a unit after
(``12 km``, ``$5.50``, ``45%`` reads as 45). The reference answer is read the same way, whole.
Values are compared as decimals with 50 significant digits, so huge exponents cannot hang.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from typing import Any

from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
)
from engine.verifiers.text import boxed_contents, completion_text

KIND = "numeric"
EXTRACT_MODES = ("last", "whole")

# Digits capped at 400 so a 50,000-digit "number" is not a number; the engine stays linear.
_PLAIN = r"(?:\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d{1,400})?|\d{1,400}(?:\.\d{1,400})?|\.\d{1,400})(?:[eE][-+]?\d{1,9})?"
_SIGNED = rf"[-+]?{_PLAIN}"
_NUMBER_OR_FRACTION = re.compile(rf"(?<![\w.])({_SIGNED})(?:\s*/\s*({_SIGNED}))?(?!\.?\d)")
_WHOLE = re.compile(rf"^\s*[$€£¥]?\s*({_SIGNED})(?:\s*/\s*({_SIGNED}))?\s*(?P<unit>[^\d\s][^\d]*)?\s*$")
# No lazy group next to \s* (that pair backtracks quadratically on long blank runs); the
# groups are stripped where they are used.
_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_CONTEXT = decimal.Context(prec=50, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation])


@dataclass(frozen=True)
class NumericConfig:
    abs_tol: float
    rel_tol: float
    extract: str


def parse_config(raw: dict[str, Any]) -> NumericConfig:
    reader = ConfigReader(raw, kind=KIND)
    config = NumericConfig(
        abs_tol=reader.number("abs_tol", 1e-6, minimum=0),
        rel_tol=reader.number("rel_tol", 1e-6, minimum=0),
        extract=reader.string("extract", "last", choices=EXTRACT_MODES),
    )
    reader.finish()
    return config


def _clean(text: str) -> str:
    """Undo the typography that hides numbers: unicode minus, LaTeX spacing and fractions."""
    text = text.replace("\u2212", "-").replace("{,}", ",").replace("\\,", "").replace("\\!", "")
    text = text.replace("\\%", "%").replace("\\$", "$")
    return _LATEX_FRACTION.sub(lambda match: f"{match.group(1).strip()}/{match.group(2).strip()}", text)


def _to_decimal(numerator: str, denominator: str | None) -> decimal.Decimal | None:
    try:
        value = decimal.Decimal(numerator.replace(",", ""))
        if denominator is not None:
            divisor = decimal.Decimal(denominator.replace(",", ""))
            if divisor == 0:
                return None
            value = _CONTEXT.divide(value, divisor)
        return value
    except (decimal.InvalidOperation, ValueError):
        return None


def read_whole_number(text: str) -> decimal.Decimal | None:
    """The number that a whole string states (``"1,000"``, ``"3/4"``, ``"$5 per kg"``), or None."""
    match = _WHOLE.match(_clean(text))
    if match is None:
        return None
    return _to_decimal(match.group(1), match.group(2))


def read_last_number(text: str) -> tuple[decimal.Decimal, str] | None:
    """The last number in free text, with the characters it was read from."""
    last = None
    for match in _NUMBER_OR_FRACTION.finditer(text):
        last = match
    if last is None:
        return None
    value = _to_decimal(last.group(1), last.group(2))
    return (value, last.group(0)) if value is not None else None


def extract_number(text: str, mode: str) -> tuple[decimal.Decimal, str] | None:
    text = _clean(text)
    if mode == "whole":
        value = read_whole_number(text)
        return (value, text.strip()) if value is not None else None
    boxes = boxed_contents(text)
    if boxes:
        whole = read_whole_number(boxes[-1])
        if whole is not None:
            return whole, boxes[-1]
        found = read_last_number(boxes[-1])
        if found is not None:
            return found
    return read_last_number(text)


def close_enough(got: decimal.Decimal, expected: decimal.Decimal, *, abs_tol: float, rel_tol: float) -> bool:
    difference = _CONTEXT.abs(_CONTEXT.subtract(got, expected))
    if difference <= _CONTEXT.create_decimal_from_float(abs_tol):
        return True
    return difference <= _CONTEXT.multiply(_CONTEXT.create_decimal_from_float(rel_tol), _CONTEXT.abs(expected))


def _format(value: decimal.Decimal) -> str:
    normalized = _CONTEXT.normalize(value)
    text = f"{normalized:f}" if abs(normalized.adjusted()) < 30 else str(normalized)
    return shorten(text, 60)


def check(config: NumericConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    if answer is None:
        raise VerifierConfigError("answer", "the numeric verifier needs the task's reference answer")
    expected = read_whole_number(str(answer))
    if expected is None:
        return errored(f"reference answer {shorten(str(answer), 60)!r} is not a number")
    found = extract_number(completion_text(completion), config.extract)
    if found is None:
        return failed("no number found" if config.extract == "last" else "completion is not a single number")
    got, source = found
    try:
        equal = close_enough(got, expected, abs_tol=config.abs_tol, rel_tol=config.rel_tol)
    except (decimal.InvalidOperation, decimal.Overflow):
        equal = got == expected
    verb = "matches" if equal else "!="
    detail = f"read {_format(got)} (from {shorten(source, 40)!r}) {verb} expected {_format(expected)}"
    return passed(detail) if equal else failed(detail)
