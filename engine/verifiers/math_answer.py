"""Reading the final answer that math-verify extracted: which side of ``a = b`` is the value,
and whether the answer hedges between several values.

The rules (docs/verifiers.md, "math"):

- ``name = value``: the last side is the value (``x = 5``, ``P(A\\mid B)=1/3``, ``A\\cap B=\\{2\\}``,
  ``\\lim_{x\\to 0}\\frac{\\sin x}{x} = 1``); the sides before it are names or working, and may use
  any notation. A side that only restates an expression from the question is not a value.
- ``exact \\approx rounded``: the value is the last exact side (``x = 1/3 \\approx 0.33`` is 1/3);
  when the only exact side is a bare name (``x \\approx 11``) it is the first approximation.
- A value side that joins values with a logic or alternative operator (``41 \\lor 42``, ``\\\\``,
  ``41 \\mid 42``) hedges, unless the reference uses that operator too. Set operators (``\\cup``,
  ``\\cap``, ``\\setminus``) are fine when the value is a set (``\\{1\\}\\cup\\{2\\}``).
- When the reference is one value, an answer that gives several (``x=2 or x=3``, ``\\{2, 3\\}``) or a
  range (``1 \\le x \\le 100``, ``x \\in [1, 2]``) hedges. Set, interval and relation references
  are compared by value through math-verify.

Only the standard library at import time: this module runs inside math_worker's helper process.
"""

from __future__ import annotations

import re
from typing import Any

_LOGIC = (
    r"lor|land|vee|wedge|bigvee|bigwedge|oplus|ominus|otimes|oslash|odot|mid|nmid|parallel|sim|simeq|cong"
    r"|equiv|propto|asymp|doteq|to|rightarrow|leftarrow|Rightarrow|Leftarrow|implies|impliedby|iff"
    r"|leftrightarrow|Leftrightarrow|longrightarrow|Longrightarrow|mapsto|gets|vdash|models|lnot|neg|vert|Vert"
    r"|lvert|rvert|lVert|rVert|triangleleft|triangleright|star|diamond|bowtie|wr|amalg|perp|between|Join"
)
_SET_OPERATIONS = r"cup|cap|bigcup|bigcap|sqcup|sqcap|uplus|setminus|smallsetminus"
# Operators math-verify reads as "keep the right-hand side": a boxed "41 \\lor 42" would match 42
# and 41 alike. A value side using one the reference does not use is hedging between values.
_HEDGES = re.compile(rf"\\(?:{_LOGIC}|{_SET_OPERATIONS})(?![A-Za-z])|\\\\|\\or(?![A-Za-z])|\|")
_SET_OPERATORS = re.compile(rf"\\(?:{_SET_OPERATIONS})(?![A-Za-z])")
_ABSOLUTE_BARS = {"|", "\\vert", "\\lvert", "\\rvert"}
_APPROX = "\\approx"
# A bare name: x, x_1, a_{n}, \alpha (constants such as \pi and e are values).
_BARE_NAME = re.compile(r"(?:[A-Za-df-z]|\\(?!pi\b|infty\b)[A-Za-z]+)(?:_\{?\w+\}?)?")


def _shorten(text: str, limit: int = 80) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def split_sides(stated: str) -> tuple[list[str], list[str]]:
    """``a = b \\approx c`` split at the ``=`` and ``\\approx`` outside brackets (not <=, >=, !=).
    Out: (the exact sides, the sides after the first ``\\approx``), empty sides dropped."""
    if "=" not in stated and _APPROX not in stated:  # the common case: one side
        return ([stated.strip()] if stated.strip() else []), []
    exact: list[str] = []
    approximate: list[str] = []
    target, depth, start, index = exact, 0, 0, 0
    while index < len(stated):
        character = stated[index]
        if character in "({[":
            depth += 1
        elif character in ")}]":
            depth = max(0, depth - 1)
        elif depth == 0 and character == "=" and (index == 0 or stated[index - 1] not in "<>!:"):
            target.append(stated[start:index])
            start = index + 1
        elif depth == 0 and stated.startswith(_APPROX, index) and not stated[index + 7 : index + 8].isalpha():
            target.append(stated[start:index])
            target, start = approximate, index + len(_APPROX)
            index = start
            continue
        index += 1
    target.append(stated[start:])
    return [side.strip() for side in exact if side.strip()], [side.strip() for side in approximate if side.strip()]


def _has_top_level_comma(text: str) -> bool:
    depth = 0
    for character in text:
        if character in "({[":
            depth += 1
        elif character in ")}]":
            depth = max(0, depth - 1)
        elif character == "," and depth == 0:
            return True
    return False


def value_sides(stated: str) -> list[str]:
    """The sides of the stated answer that carry values: all but the name on the left of ``=``."""
    exact, approximate = split_sides(stated)
    sides = exact + approximate
    return sides[1:] if len(sides) > 1 else sides


def operator_problem(stated: str, reference: str, value: object) -> str:
    """Why a value side of the stated answer hedges with an operator, or "".

    value: math-verify's reading of the whole stated answer (a sympy object or a string)."""
    text = " = ".join(value_sides(stated))
    used = {match.group(0) for match in _HEDGES.finditer(text)}
    used -= {match.group(0) for match in _HEDGES.finditer(reference)}
    if used & _ABSOLUTE_BARS and _has(value, "Abs"):
        used -= _ABSOLUTE_BARS
    if used and _SET_OPERATORS.search(text) and _contains_set(value):
        used = {operator for operator in used if not _SET_OPERATORS.fullmatch(operator)}
    if not used:
        return ""
    return f"answer {_shorten(stated)!r} combines values with {sorted(used)[0]}: one final answer is needed"


def _has(value: Any, name: str) -> bool:
    try:
        import sympy

        return bool(getattr(value, "has", None)) and value.has(getattr(sympy, name))
    except Exception:  # noqa: BLE001 - a value sympy cannot inspect has nothing to exempt
        return False


def _contains_set(value: Any) -> bool:
    try:
        from sympy import Set

        if getattr(value, "is_Number", False):
            return False
        return isinstance(value, Set) or (hasattr(value, "atoms") and bool(value.atoms(Set)))
    except Exception:  # noqa: BLE001
        return False


def is_one_value(value: object) -> bool:
    """Whether a parsed reference is one number or expression: not a set, tuple, range or relation."""
    from sympy import Expr

    return isinstance(value, Expr) and not _contains_set(value)


def several_values(value: object) -> bool:
    """Whether a parsed answer gives several values or a range: a set or tuple of two or more, an
    interval, an inequality or a logical combination; ``x = v`` counts as its right side and a
    chain ``a = b = c`` as its sides."""
    from sympy import And, Eq, FiniteSet, Set, Tuple
    from sympy.core.relational import Relational
    from sympy.logic.boolalg import BooleanFunction

    if isinstance(value, Eq):
        return several_values(value.rhs)
    if isinstance(value, And) and all(isinstance(item, Eq) for item in value.args):
        return any(several_values(item) for item in value.args)  # a chain a = b = c
    if isinstance(value, FiniteSet | Tuple):
        return len(value) > 1 or any(several_values(item) for item in value)
    if isinstance(value, Set | Relational | BooleanFunction):  # not Boolean: a Symbol is one
        return True
    return isinstance(value, list | tuple | set) and len(value) > 1


def _is_copy(side: str, question: str) -> bool:
    normalized = _normalize(side)
    return bool(_BINARY_OPERATION.search(side)) and len(normalized) >= 3 and normalized in question


_BINARY_OPERATION = re.compile(r"[\w)\]]\s*(?:[-+*/^]|\\cdot|\\times|\\div)")
_LAYOUT = re.compile(r"\s+|\$|\\left|\\right|\\[,;:!]|\\displaystyle|[{}]")


def _normalize(text: str) -> str:
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = text.replace("\\cdot", "*").replace("\\times", "*").replace("\u00d7", "*").replace("\u00b7", "*")
    text = text.replace("\\div", "/").replace("\u00f7", "/")
    return _LAYOUT.sub("", text)


def final_result(stated: str, prompt: str, reference: str = "") -> str | None:
    """The stated value (see the module's rules); ``stated`` itself when it is one side or a list of
    equations, or when the reference is itself an equation. None when every side only restates an
    expression from the question ("2 + 6" for "What is 2 + 6?")."""
    if not stated:
        return stated
    exact, approximate = split_sides(stated)
    question = _normalize(prompt) if prompt else ""
    if question and reference and _is_copy(reference, question):
        question = ""  # the task's answer is itself an expression from the question
    if len(exact) == 1 and approximate and _BARE_NAME.fullmatch(exact[0]):
        exact.append(approximate[0])
    sides = exact or approximate
    kept = [side for side in sides if not (question and _is_copy(side, question))]
    if not kept:
        return None
    if split_sides(reference)[0][1:] or any(_has_top_level_comma(side) for side in sides[:-1]):
        return stated if kept[-1] == sides[-1] else kept[-1]
    return kept[-1]
