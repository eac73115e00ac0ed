"""Math-verify evaluation, and the helper process that runs it for risky inputs.

``evaluate(request)`` is the whole comparison (the answer-reading rules are in math_answer.py).
``kinds/math.py`` sends every comparison, since any answer could make sympy run away
(``10^{10^{10}}``, factorials, huge expressions), to this module run as a helper:
``python -I math_worker.py <memory_bytes>`` reads one JSON request per line on stdin and writes
one JSON response per line on stdout. There, in a main thread, an interval timer gives a soft
deadline that usually returns a clean "timeout"; when sympy is stuck in C where no signal
reaches, the caller kills the process. The module imports only the standard library at import time (math-verify lazily).

Request:  {"answer": str, "completion": str, "prompt": str, "timeout_seconds": float,
           "float_rounding": int, "numeric_precision": int, "strict": bool, "boxed_first": bool,
           "extraction": ["latex", "expr"], "allow_set_relation_comp": bool, "units": "strict" | "ignore"}
Response: {"outcome": "pass" | "fail" | "error" | "timeout", "detail": str}
"""

from __future__ import annotations

import os
import re
import sys
from decimal import Decimal, localcontext

if __package__:  # imported as engine.verifiers.math_worker
    from engine.verifiers import answer_span, answer_value, helper_loop, math_answer
else:  # the helper script (python -I): its sibling files, never another installed copy of the package
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import answer_span  # type: ignore[no-redef]
    import answer_value  # type: ignore[no-redef]
    import helper_loop  # type: ignore[no-redef]
    import math_answer  # type: ignore[no-redef]


def _shorten(text: str, limit: int = 80) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


_math_verify = None


def _load_math_verify():
    """Import math-verify once, with its disabled-timeout warning silenced: we bound time ourselves."""
    global _math_verify
    if _math_verify is None:
        import math_verify
        import math_verify.grader
        import math_verify.parser

        math_verify.parser.TIMEOUT_WARNING_SHOWN = True
        math_verify.grader.TIMEOUT_WARNING_SHOWN = True
        _math_verify = math_verify
    return _math_verify


_EXTRACTION: dict[tuple, list] = {}  # (boxed_first, targets) -> extraction configs (built once: hashed per call)
TARGETS = ("latex", "expr")


def _extraction(request: dict) -> list:
    """math-verify extraction configs for the request's ``boxed_first`` and ``extraction`` targets."""
    key = (bool(request.get("boxed_first", True)), tuple(request.get("extraction") or TARGETS))
    if key not in _EXTRACTION:
        math_verify = _load_math_verify()
        latex = (
            math_verify.LatexExtractionConfig(boxed_match_priority=0) if key[0] else math_verify.LatexExtractionConfig()
        )
        built = {"latex": latex, "expr": math_verify.ExprExtractionConfig()}
        _EXTRACTION[key] = [built[target] for target in TARGETS if target in key[1]]
    return _EXTRACTION[key]


def evaluate(request: dict) -> dict:
    """Compare one completion with its reference answer. In: a request as described above.
    Out: a response. Raises nothing but the BaseExceptions used to interrupt it."""
    try:
        return _compare(request, _load_math_verify())
    except RecursionError:
        return {"outcome": "fail", "detail": "answer nested too deeply to evaluate"}
    except MemoryError:
        return {"outcome": "fail", "detail": "answer too large to evaluate"}
    except Exception as error:  # noqa: BLE001 - one bad input must not end the caller
        return {"outcome": "error", "detail": f"math-verify raised {type(error).__name__}: {_shorten(str(error))}"}


_DELIMITERS = ("$", "\\boxed", "\\(", "\\[")
# "1,22" or "0,5": a decimal comma (three digits after it would be a thousands separator).
_DECIMAL_COMMA = re.compile(r"[-+]?\d+,(?:\d{1,2}|\d{4,})")


# math-verify cuts "1 - \\frac{1}{\\mathrm{e}}" short at "\\mathrm{e}" and reads it as 1, so every answer
# starting "1" matched; written as "e" it is Euler's number (docs/verifiers.md, deliberate disagreements).
_UPRIGHT_E = re.compile(r"\\(?:mathrm|rm|text|operatorname)\s*\{\s*e\s*\}")


# The commonest reference, a plain integer, read as math-verify reads "$18$" ([Integer(18), "18"]),
# without its parse: that parse is about half of a comparison's time.
_PLAIN_INTEGER = re.compile(r"-?(?:0|[1-9]\d{0,14})")


def _reference(answer: str, parse) -> list:
    """math-verify's readings of the reference: a bare one ("x^2+1", "\\{1,2\\}") is LaTeX math, and
    a bare decimal comma ("1,22") is read as a decimal as well as a pair."""
    stripped = answer.strip()
    if _PLAIN_INTEGER.fullmatch(stripped):
        from sympy import Integer

        return [Integer(stripped), stripped]
    if any(marker in answer for marker in _DELIMITERS):
        return parse(answer, parsing_timeout=None)
    gold = parse(f"${answer}$", parsing_timeout=None) or parse(answer, parsing_timeout=None)
    if _DECIMAL_COMMA.fullmatch(answer.strip()):
        gold = parse(f"${answer.strip().replace(',', '.')}$", parsing_timeout=None) + gold
    return gold


def _compare(request: dict, math_verify) -> dict:
    expected = answer_value.read_quantity(request["answer"])
    if expected is not None:  # a number: the committed answer must state it (answer_span's rules)
        return _compare_number(request, math_verify, expected)
    taken_back = answer_span.taken_back(request["completion"])
    if taken_back:
        return {"outcome": "fail", "detail": taken_back}
    parse = math_verify.parse
    answer = _UPRIGHT_E.sub("e", request["answer"])
    gold = _reference(answer, parse)
    if not gold:
        return {"outcome": "error", "detail": f"reference answer {_shorten(answer)!r} could not be parsed"}
    completion = _UPRIGHT_E.sub("e", request["completion"])
    predicted = parse(completion, extraction_config=_extraction(request), parsing_timeout=None)
    if not predicted:
        return {"outcome": "fail", "detail": "no final answer found"}
    stated = predicted[-1] if isinstance(predicted[-1], str) else ""
    readings = [value for value in gold if not isinstance(value, str)]
    one_value = bool(readings) and all(map(math_answer.is_one_value, readings))
    problem = _hedge(stated, answer, predicted[0], one_value=one_value)
    if problem:
        return {"outcome": "fail", "detail": problem}
    result = math_answer.final_result(stated, request.get("prompt") or "", answer)
    if result is None:
        return {"outcome": "fail", "detail": f"answer {_shorten(stated)!r} restates the question's expression"}
    if result != stated:
        predicted = parse(f"${result}$", parsing_timeout=None)
        if not predicted:
            return {"outcome": "fail", "detail": f"no value in {_shorten(stated)!r}"}
        problem = _hedge(result, answer, predicted[0], one_value=one_value)
        if problem:
            return {"outcome": "fail", "detail": problem}
    return _verdict(request, math_verify, gold, predicted)


def _compare_number(request: dict, math_verify, expected) -> dict:
    """A number reference: the completion's committed value (answer_span.committed), equal exactly or,
    for two plain numbers, under math-verify's float rounding (``0.3333`` for 1/3 at 4 decimals)."""
    units = request.get("units", "strict")
    reading = answer_span.committed(request["completion"])
    if reading.quantity is None:
        return {"outcome": "fail", "detail": f"no committed value: {reading.refusal}"}
    got, shown = reading.quantity, _shorten(reading.stated or reading.quantity.shown())
    if answer_value.same_quantity(got, expected, units):
        return {"outcome": "pass", "detail": f"answer {shown!r} matches {expected.shown()!r}"}
    plain = not (got.percent or expected.percent or got.unit or expected.unit)
    if plain and got.number != 0 and _rounded_equal(request, math_verify, got.number, expected.number):
        return {"outcome": "pass", "detail": f"answer {shown!r} matches {expected.shown()!r} when rounded"}
    return {"outcome": "fail", "detail": f"answer {shown!r}: {answer_span.difference(got, expected, units)}"}


def _rounded_equal(request: dict, math_verify, got, expected) -> bool:
    gold = math_verify.parse(f"${_written(expected)}$", parsing_timeout=None)
    predicted = math_verify.parse(f"${_written(got)}$", parsing_timeout=None)
    return bool(gold and predicted) and _verdict(request, math_verify, gold, predicted)["outcome"] == "pass"


def _written(value) -> str:
    """A Fraction as math-verify reads it: its exact decimal when it has one, else ``\\frac{p}{q}``."""
    denominator = value.denominator
    for factor in (2, 5):
        while denominator % factor == 0:
            denominator //= factor
    if denominator != 1:
        return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    with localcontext() as context:
        context.prec = 1000
        return format(Decimal(value.numerator) / Decimal(value.denominator), "f")


def _hedge(stated: str, answer: str, value: object, *, one_value: bool) -> str:
    """Why the stated answer hedges between values (math_answer's rules), or ""."""
    problem = math_answer.operator_problem(stated, answer, value)
    if not problem and one_value and math_answer.several_values(value):
        problem = f"answer {_shorten(stated)!r} gives several values; one is asked"
    return problem


def _verdict(request: dict, math_verify, gold: list, predicted: list) -> dict:
    equal = math_verify.verify(
        gold,
        predicted,
        float_rounding=int(request.get("float_rounding", 6)),
        numeric_precision=int(request.get("numeric_precision", 15)),
        strict=bool(request.get("strict", True)),
        allow_set_relation_comp=bool(request.get("allow_set_relation_comp", False)),
        timeout_seconds=None,
    )
    shown = str(predicted[-1]) if isinstance(predicted[-1], str) else str(predicted[0])
    expected = str(gold[-1]) if isinstance(gold[-1], str) else str(gold[0])
    verb = "matches" if equal else "does not match"
    return {
        "outcome": "pass" if equal else "fail",
        "detail": f"answer {_shorten(shown)!r} {verb} {_shorten(expected)!r}",
    }


def _timed_out(request: dict) -> dict:
    return {"outcome": "timeout", "detail": f"math verification took over {request.get('timeout_seconds', 5)}s"}


def main() -> None:
    helper_loop.serve(evaluate, load=_load_math_verify, timed_out=_timed_out)


if __name__ == "__main__":
    main()
