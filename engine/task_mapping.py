"""A column mapping: how the rows of someone else's dataset become Passband tasks.

A dataset such as GSM8K has its own columns (`question`, `answer` with the final answer after
`####`). A `ColumnMapping` says how to build each task from a row: a prompt template over the
columns ("Solve: {question}"), the answer column and how to get the final answer out of it (the
whole value, the text after the last `####`, the last `\\boxed{}`, or an RE2 pattern), an optional
key column (stable keys, so importing the same file again changes nothing), metadata columns and
the verifier. `task_object` turns one row into a task object in Passband's format, which
`engine.task_format.validate_task_object` then checks like any line of a JSONL file.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from engine import verifiers
from engine.task_format import LineProblem, difficulty_value
from engine.verifiers.author_regex import compile_author_regex
from engine.verifiers.text import boxed_contents

EXTRACTORS = {
    "none": "the whole value",
    "after_hashes": "the text after the last ####",
    "last_boxed": "the contents of the last \\boxed{}",
    "regex": "a regular expression (RE2): its first group, or the whole match",
}
# The mapping's fields that are one string each (the rest: metadata_columns, verifier).
TEXT_FIELDS = (
    "prompt",
    "answer_column",
    "answer_extractor",
    "answer_pattern",
    "key_column",
    "key_prefix",
    "difficulty_column",
)
ROW_NUMBER = "#row"  # as the key column: the row's line or row number
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


class MappingError(ValueError):
    """A mapping that cannot be used: `field` is the mapping's field, `reason` what is wrong."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def template_columns(template: str) -> list[str]:
    """The columns a prompt template names, in order; MappingError for a stray brace or an empty {}."""
    names = []
    for match in _PLACEHOLDER.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise MappingError("prompt", f"has a lone {token!r} at character {match.start() + 1}; write {token * 2}")
        if not match.group(1).strip():
            raise MappingError("prompt", f"has an empty {{}} at character {match.start() + 1}; name a column")
        names.append(match.group(1))
    return names


@dataclass(frozen=True)
class ColumnMapping:
    """How one row becomes one task. Empty strings mean "not mapped"; verifier None: the environment's."""

    prompt: str
    answer_column: str = ""
    answer_extractor: str = "none"
    answer_pattern: str = ""
    key_column: str = ""
    key_prefix: str = ""
    metadata_columns: tuple[str, ...] = ()
    verifier: dict[str, Any] | None = None
    difficulty_column: str = ""
    prompt_columns: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise MappingError("prompt", 'needs a template such as "{question}"')
        object.__setattr__(self, "prompt_columns", tuple(template_columns(self.prompt)))
        if not self.prompt_columns:
            raise MappingError("prompt", 'names no column; write it like "Solve: {question}"')
        if self.answer_extractor not in EXTRACTORS:
            raise MappingError("answer_extractor", f"must be one of {', '.join(EXTRACTORS)}")
        if self.answer_extractor != "none" and not self.answer_column:
            raise MappingError("answer_extractor", "needs an answer column to extract from")
        if self.answer_extractor == "regex":
            if not self.answer_pattern:
                raise MappingError("answer_pattern", "needs a pattern for the regex extractor")
            try:
                compile_author_regex(self.answer_pattern)
            except ValueError as error:
                raise MappingError("answer_pattern", f"is not a pattern RE2 accepts ({error})") from None
        if self.key_prefix and not self.key_column:
            raise MappingError("key_prefix", "needs a key column (or the row number) to follow it")
        if self.verifier is not None:
            if not isinstance(self.verifier, dict) or not self.verifier:
                raise MappingError("verifier", 'must be an object like {"kind": "math"}, or left to the environment')
            try:
                verifiers.validate_config(self.verifier)
            except verifiers.VerifierConfigError as error:
                raise MappingError("verifier", str(error)) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ColumnMapping:
        """From its stored or posted form; MappingError names the field that is wrong."""
        if not isinstance(data, Mapping):
            raise MappingError("", "must be an object")
        known = set(TEXT_FIELDS)
        unknown = sorted(set(data) - known - {"metadata_columns", "verifier"})
        if unknown:
            raise MappingError(unknown[0], f"is not a mapping field; expected some of {sorted(known)}")
        values = {}
        for name in known:
            value = data.get(name, "" if name != "answer_extractor" else "none")
            if not isinstance(value, str):
                raise MappingError(name, f"must be a string, got {type(value).__name__}")
            values[name] = value if name in ("prompt", "answer_pattern", "key_prefix") else value.strip()
        metadata = data.get("metadata_columns", [])
        if not isinstance(metadata, (list, tuple)) or not all(isinstance(name, str) for name in metadata):
            raise MappingError("metadata_columns", "must be a list of column names")
        return cls(**values, metadata_columns=tuple(metadata), verifier=data.get("verifier"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "answer_column": self.answer_column,
            "answer_extractor": self.answer_extractor,
            "answer_pattern": self.answer_pattern,
            "key_column": self.key_column,
            "key_prefix": self.key_prefix,
            "metadata_columns": list(self.metadata_columns),
            "verifier": self.verifier,
            "difficulty_column": self.difficulty_column,
        }

    def column_problems(self, columns: Sequence[str], *, filename: str) -> list[LineProblem]:
        """The mapped columns the file does not have (the whole file's problems: line 0)."""
        available = set(columns)
        shown = ", ".join(columns) or "none"
        named = [("prompt", name) for name in self.prompt_columns]
        named += [("answer_column", self.answer_column)]
        named += [("key_column", self.key_column if self.key_column != ROW_NUMBER else "")]
        named += [("metadata_columns", name) for name in self.metadata_columns]
        named += [("difficulty_column", self.difficulty_column)]
        return [
            LineProblem(filename, 0, f"mapping: {field_name}", f"the file has no column {name!r}; its columns: {shown}")
            for field_name, name in named
            if name and name not in available
        ]

    def task_object(
        self, row: Any, *, number: int, filename: str, unit: str = "line"
    ) -> tuple[dict[str, Any] | None, list[LineProblem]]:
        """One row as a task object in Passband's format, or None and the problems (named by column)."""
        problems: list[LineProblem] = []

        def problem(column: str, reason: str) -> None:
            problems.append(LineProblem(filename, number, column, reason, unit))

        if not isinstance(row, Mapping):
            problem("", f"expected an object with the file's columns, got {type(row).__name__}")
            return None, problems
        task: dict[str, Any] = {}
        prompt = self._prompt(row, problem)
        if prompt is not None:
            task["prompt"] = prompt
        if self.answer_column:
            answer = self._answer(row, problem)
            if answer is not None:
                task["answer"] = answer
        if self.key_column:
            value = number if self.key_column == ROW_NUMBER else _cell(row, self.key_column, problem)
            if value is not None:
                task["key"] = f"{self.key_prefix}{value}"
        metadata = {}
        for column in self.metadata_columns:
            try:
                metadata[column] = _json_value(row.get(column))
            except ValueError as error:
                problem(column, str(error))
        if metadata:
            task["metadata"] = metadata
        if self.difficulty_column:
            try:
                task["difficulty"] = difficulty_value(_json_value(row.get(self.difficulty_column)))
            except ValueError as error:
                problem(self.difficulty_column, f"as the declared difficulty: {error}")
        if self.verifier is not None:
            task["verifier"] = self.verifier
        return (None, problems) if problems else (task, [])

    def _prompt(self, row: Mapping, problem) -> Any:
        if len(self.prompt_columns) == 1 and self.prompt.strip() == "{" + self.prompt_columns[0] + "}":
            value = row.get(self.prompt_columns[0])
            if isinstance(value, list):  # a column of chat messages is the prompt as it is
                return value
        text_parts: list[str] = []
        last = 0
        for match in _PLACEHOLDER.finditer(self.prompt):
            text_parts.append(self.prompt[last : match.start()])
            last = match.end()
            if match.group(1) is None:
                text_parts.append(match.group(0)[0])  # {{ or }}
                continue
            value = _cell(row, match.group(1), problem)
            if value is None:
                return None
            text_parts.append(value if isinstance(value, str) else json.dumps(_json_safe(value), ensure_ascii=False))
        text_parts.append(self.prompt[last:])
        return "".join(text_parts)

    def _answer(self, row: Mapping, problem) -> str | None:
        value = _cell(row, self.answer_column, problem)
        if value is None:
            return None
        text = value if isinstance(value, str) else str(value)
        try:
            return extract_answer(text, extractor=self.answer_extractor, pattern=self.answer_pattern)
        except ValueError as error:
            problem(self.answer_column, str(error))
            return None


def extract_answer(text: str, *, extractor: str, pattern: str = "") -> str:
    """The final answer inside an answer column's text; ValueError says why there is none."""
    if extractor == "none":
        return text.strip()
    if extractor == "after_hashes":
        if "####" not in text:
            raise ValueError("has no '####' before a final answer (the extractor is 'text after ####')")
        found = text.rsplit("####", 1)[1].strip()
        if not found:
            raise ValueError("has nothing after its last '####'")
        return found
    if extractor == "last_boxed":
        boxes = boxed_contents(text)
        if not boxes:
            raise ValueError("has no \\boxed{...} (the extractor is 'last \\boxed{}')")
        return boxes[-1].strip()
    if extractor == "regex":
        match = compile_author_regex(pattern).search(text)
        if match is None:
            raise ValueError(f"does not match the pattern {pattern!r}")
        return (match.group(1) if match.re.groups else match.group(0)).strip()
    raise ValueError(f"unknown extractor {extractor!r}")


def _cell(row: Mapping, column: str, problem) -> Any:
    """A mapped cell's value, or None after naming the problem (a missing or empty cell)."""
    if column not in row:
        problem(column, "this row has no such column")
        return None
    value = row[column]
    if value is None or (isinstance(value, str) and not value.strip()):
        problem(column, "is empty")
        return None
    return value


def _json_safe(value: Any) -> Any:
    try:
        return _json_value(value)
    except ValueError:
        return str(value)


def _json_value(value: Any) -> Any:
    """A cell as JSON metadata can hold it: dates as ISO text, decimals as text, NaN as null."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    raise ValueError(f"holds {type(value).__name__} data, which task metadata (JSON) cannot keep")


_PROMPT_NAMES = ("question", "prompt", "problem", "input", "instruction", "query")
_ANSWER_NAMES = ("answer", "solution", "output", "response", "target")
_KEY_NAMES = ("key", "id", "task_id", "uid", "idx")


def suggest_mapping(columns: Sequence[str], first_row: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A first guess at a mapping from the column names (and the first row's answer), for a form to start from."""
    by_name = {column.lower(): column for column in columns}

    def first(names: tuple[str, ...]) -> str:
        return next((by_name[name] for name in names if name in by_name), "")

    prompt = first(_PROMPT_NAMES) or (columns[0] if columns else "")
    answer = first(_ANSWER_NAMES)
    sample = str((first_row or {}).get(answer) or "") if answer else ""
    extractor = "after_hashes" if "####" in sample else "last_boxed" if "\\boxed" in sample else "none"
    return {
        "prompt": "{" + prompt + "}" if prompt else "",
        "answer_column": answer,
        "answer_extractor": extractor,
        "answer_pattern": "",
        "key_column": first(_KEY_NAMES),
        "key_prefix": "",
        "metadata_columns": [],
        "verifier": None,
    }
