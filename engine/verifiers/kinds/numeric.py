"""``numeric``: the number a completion commits to equals the reference number within a tolerance.

Config (all optional)::

    {"kind": "numeric",
     "abs_tol": 1e-6,        # pass when |got - expected| <= abs_tol ...
     "rel_tol": 1e-6,        # ... or when |got - expected| <= rel_tol * |expected|
     "extract": "last",      # "last": the committed final answer (answer_span.committed: a \\boxed{},
                             #         an <answer> tag, "the answer is", else the last line);
                             # "whole": the whole completion must be one number
     "units": "strict"}      # "strict": a unit or percent sign is part of the value; "ignore": dropped

Numbers are read as people and models write them (engine/verifiers/answer_value.py): ``1,000``,
``1e3``, ``.5``, ``-3``, ``3/4`` and ``\\frac{3}{4}`` in lowest terms, "eight", a currency sign before
and a word after (``$5.50``, "34 marbles"). A negated or hedged answer, an unworked expression
(``6*7``) and several values commit to nothing and fail. ``45%`` is 0.45 and ``12 km`` is 12 in km:
with ``units: "strict"`` (the default) they equal only a reference with the same unit or value.
The reference answer is read whole, the same way. Values are compared as decimals with 50
significant digits, so huge exponents cannot hang.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from engine.verifiers import answer_span, answer_value
from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.text import completion_text

KIND = "numeric"
EXTRACT_MODES = ("last", "whole")
_CONTEXT = decimal.Context(prec=50, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.InvalidOperation])


@dataclass(frozen=True)
class NumericConfig:
    abs_tol: float
    rel_tol: float
    extract: str
    units: str


def parse_config(raw: dict[str, Any]) -> NumericConfig:
    reader = ConfigReader(raw, kind=KIND)
    config = NumericConfig(
        abs_tol=reader.number("abs_tol", 1e-6, minimum=0),
        rel_tol=reader.number("rel_tol", 1e-6, minimum=0),
        extract=reader.string("extract", "last", choices=EXTRACT_MODES),
        units=reader.string("units", "strict", choices=answer_value.UNIT_MODES),
    )
    reader.finish()
    return config


def _decimal(value: Fraction) -> decimal.Decimal:
    return _CONTEXT.divide(decimal.Decimal(value.numerator), decimal.Decimal(value.denominator))


def close_enough(got: Fraction, expected: Fraction, *, abs_tol: float, rel_tol: float) -> bool:
    """Whether two values are within the absolute or the relative tolerance (decimals of 50 digits)."""
    if got == expected:
        return True
    try:
        difference = _CONTEXT.abs(_CONTEXT.subtract(_decimal(got), _decimal(expected)))
        if difference <= _CONTEXT.create_decimal_from_float(abs_tol):
            return True
        relative = _CONTEXT.multiply(_CONTEXT.create_decimal_from_float(rel_tol), _CONTEXT.abs(_decimal(expected)))
        return difference <= relative
    except (decimal.InvalidOperation, decimal.Overflow):
        return False


def _stated(config: NumericConfig, text: str) -> answer_value.Reading:
    if config.extract == "whole":
        quantity = answer_value.read_quantity(text)
        return answer_value.Reading(quantity, "" if quantity else "completion is not a single number")
    return answer_span.committed(text)


def check(config: NumericConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    if answer is None:
        raise VerifierConfigError("answer", "the numeric verifier needs the task's reference answer")
    expected = answer_value.read_quantity(str(answer))
    if expected is None:
        return errored(f"reference answer {shorten(str(answer), 60)!r} is not a number")
    reading = _stated(config, completion_text(completion))
    if reading.quantity is None:
        return failed(f"no committed value: {reading.refusal}")
    got = reading.quantity
    same_unit = config.units == "ignore" or got.unit == expected.unit
    equal = same_unit and close_enough(
        got.value(config.units), expected.value(config.units), abs_tol=config.abs_tol, rel_tol=config.rel_tol
    )
    if equal:
        return passed(f"read {shorten(got.shown(), 60)!r}: matches expected {shorten(expected.shown(), 60)!r}")
    return failed(f"read {shorten(got.shown(), 60)!r}: {answer_span.difference(got, expected, config.units)}")


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    batchable=True,
    gameability="text",
    exports=KindExports(),
    examples=(KindExample({"kind": KIND}, passing="So the total is 42.", failing="The total is 41.", answer="42"),),
)
