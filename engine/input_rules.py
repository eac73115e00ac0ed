"""The input rule every door applies: pages, uploads and the API alike.

Text is valid Unicode without NUL: PostgreSQL cannot store U+0000 in a text column, and a lone UTF-16
surrogate (a JSON escape such as "\\ud800") cannot be encoded as UTF-8. Decoded JSON nests at most
MAX_JSON_DEPTH levels: the verifiers, jsonschema and the ORM walk values recursively, and a deeper
value would exhaust the stack. Bodies and uploads are bounded by the size limits in settings.

Addresses and API bodies name records: a whole number in a query parameter, an API body or a
path's id fits 64 signed bits (SQLite cannot bind a larger one, PostgreSQL's bigint cannot hold
it), and a query parameter is at most MAX_QUERY_VALUE characters.

Pure functions, no Django: each returns a sentence naming where the problem is, or None, and the
caller refuses the input with a 400 that names the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Deep enough for any task, verifier config, tool schema or API body Passband takes (they nest a
# handful of levels), shallow enough that every recursive walk over the value stays far from the
# interpreter's recursion limit.
MAX_JSON_DEPTH = 64
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")
# What a database integer column (and an id) can hold: signed 64 bits.
INTEGER_MIN, INTEGER_MAX = -(2**63), 2**63 - 1
# Longer than any filter, search or cursor Passband writes into a query string.
MAX_QUERY_VALUE = 2000


@dataclass(frozen=True)
class InputProblem:
    """What is wrong and where: `path` is "" for the value itself, else like "messages[2].content"."""

    path: str
    reason: str

    @property
    def field(self) -> str:
        """The top-level field the problem is in (the first name of the path), "" for the value itself."""
        return re.split(r"[.\[]", self.path, maxsplit=1)[0] if not self.path.startswith("[") else ""

    def __str__(self) -> str:
        return self.reason


def text_problem(text: str, *, where: str = "") -> str | None:
    """Why `text` is not acceptable text ("holds a NUL byte at character 3 of a.b: ..."), or None."""
    match = _BAD_CHARACTER.search(text)
    if match is None:
        return None
    at = f"at character {match.start() + 1}{' of ' + _shown(where) if where else ''}"
    if match.group() == "\x00":
        return f"holds a NUL byte (\\u0000) {at}: text cannot contain NUL; remove it"
    return f"holds a lone surrogate {at}: not valid Unicode text; fix the escape"


def integer_problem(number: int, *, where: str = "") -> str | None:
    """Why `number` cannot name a record or fill an integer column (beyond 64 signed bits), or None."""
    if INTEGER_MIN <= number <= INTEGER_MAX:
        return None
    subject = f"{_shown(where)} is" if where else "is"
    return f"{subject} a whole number beyond 64 bits: use one from {INTEGER_MIN} to {INTEGER_MAX}"


def value_problem(
    value: Any, *, max_depth: int = MAX_JSON_DEPTH, bounded_integers: bool = False
) -> InputProblem | None:
    """The first problem in a decoded JSON value: a bad character in a string or a name, nesting deeper
    than `max_depth` levels, or (with `bounded_integers`, for API bodies) a whole number beyond 64 bits;
    None when there is none. Walks without recursion, so any depth is safe to check."""
    pending: list[tuple[Any, str, int]] = [(value, "", 0)]
    while pending:
        item, path, depth = pending.pop()
        if isinstance(item, str):
            reason = text_problem(item, where=path)
            if reason is not None:
                return InputProblem(path, reason)
            continue
        if bounded_integers and isinstance(item, int) and not isinstance(item, bool):
            reason = integer_problem(item, where=path)
            if reason is not None:
                return InputProblem(path, reason)
            continue
        if isinstance(item, dict):
            children = [(name, f"{path}.{name}" if path else str(name)) for name in item]
            values = list(item.values())
        elif isinstance(item, list):
            children = [(index, f"{path}[{index}]") for index in range(len(item))]
            values = item
        else:
            continue
        if depth >= max_depth:
            return InputProblem(path, f"nests deeper than {max_depth} levels{' at ' + _shown(path) if path else ''}")
        for (name, child_path), child in reversed(list(zip(children, values))):
            if isinstance(name, str):
                reason = text_problem(name, where=f"the name {child_path!r}")
                if reason is not None:
                    return InputProblem(child_path, reason)
            pending.append((child, child_path, depth + 1))
    return None


def fields_problem(fields: Iterable[tuple[str, list[str]]]) -> InputProblem | None:
    """The first problem among form or query fields given as (name, values), or None; its path is
    the field's name (with any NUL shown as \\u0000)."""
    for name, values in fields:
        for text in (name, *values):
            reason = text_problem(text)
            if reason is not None:
                return InputProblem(name.replace("\x00", "\\u0000"), reason)
    return None


def query_problem(fields: Iterable[tuple[str, list[str]]]) -> InputProblem | None:
    """The first problem among query parameters given as (name, values): the text rule, a value over
    MAX_QUERY_VALUE characters, or a whole number (as int() reads it: signs, spaces, any digits)
    beyond 64 bits; None when there is none."""
    fields = list(fields)
    problem = fields_problem(fields)
    if problem is not None:
        return problem
    for name, values in fields:
        for text in values:
            if len(text) > MAX_QUERY_VALUE:
                return InputProblem(name, f"is {len(text):,} characters long: at most {MAX_QUERY_VALUE:,}")
            number = _whole_number(text)
            reason = integer_problem(number) if number is not None else None
            if reason is not None:
                return InputProblem(name, reason)
    return None


def _whole_number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


class InputError(ValueError):
    """Input that breaks the rule; its message says what is wrong and where."""


def json_text(text: str) -> Any:
    """Decode JSON text typed into a form (a verifier, metadata, tools), held to the rule.
    Raises InputError: "not valid JSON (... at line 1, column 2)", nesting too deep, NUL or a lone
    surrogate, each with where it is."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    except RecursionError:
        raise InputError(f"not valid JSON (nests deeper than {MAX_JSON_DEPTH} levels)") from None
    problem = value_problem(value)
    if problem is not None:
        raise InputError(problem.reason)
    return value


def _shown(path: str, limit: int = 120) -> str:
    return path if len(path) <= limit else path[:limit] + "…"
