"""The task file format: parse and validate JSONL or CSV task files, line by line.

Pure functions with no database access: `parse_task_file` turns bytes into validated task drafts
and a list of problems that name the file, line and field. The import service decides what to
write. A file with any problem imports nothing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from engine import verifiers

KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$")
ROLES = {"system", "user", "assistant", "tool"}
FIELDS = {"key", "prompt", "answer", "verifier", "domain", "metadata", "authoring_cost_usd", "tools"}
REQUIRED = ("prompt",)


@dataclass(frozen=True)
class LineProblem:
    """One thing wrong with one line of a task file."""

    filename: str
    line: int  # 1-based; 0 for the file as a whole
    field: str  # "" when the problem is the whole line
    reason: str

    def __str__(self) -> str:
        where = f"{self.filename}, line {self.line}" if self.line else self.filename
        if self.field:
            where += f", field '{self.field}'"
        return f"{where}: {self.reason}"


@dataclass
class TaskDraft:
    """A validated task, ready to be written as a new task or a new version."""

    line: int
    key: str | None
    prompt: list[dict[str, str]]
    answer: str
    verifier: dict[str, Any]
    domain: str
    metadata: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    authoring_cost_usd: Decimal = Decimal("0")

    @property
    def content_hash(self) -> str:
        return content_hash(prompt=self.prompt, answer=self.answer, verifier=self.verifier, tools=self.tools)


def content_hash(*, prompt: list[dict], answer: str, verifier: dict, tools: list) -> str:
    """sha256 of what the model sees and how it is graded, in canonical JSON."""
    canonical = json.dumps(
        {"prompt": prompt, "answer": answer, "verifier": verifier, "tools": tools},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def normalise_prompt(value: Any) -> list[dict[str, str]]:
    """A prompt is a non-empty string (one user message) or a list of chat messages."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("must not be empty")
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value:
        messages = []
        for position, message in enumerate(value):
            if not isinstance(message, dict):
                raise ValueError(f"message {position} must be an object with 'role' and 'content'")
            role, content = message.get("role"), message.get("content")
            if role not in ROLES:
                raise ValueError(f"message {position} has role {role!r}; expected one of {sorted(ROLES)}")
            if not isinstance(content, str):
                raise ValueError(f"message {position} needs 'content' as a string")
            messages.append({"role": role, "content": content})
        if not any(message["role"] == "user" for message in messages):
            raise ValueError("needs at least one user message")
        return messages
    raise ValueError("must be a non-empty string or a list of {role, content} messages")


def validate_task_object(
    obj: Any, *, filename: str, line: int, default_verifier: dict, default_domain: str
) -> tuple[TaskDraft | None, list[LineProblem]]:
    """Check one decoded task object. Returns a draft, or None and the problems found."""
    problems: list[LineProblem] = []

    def problem(field_name: str, reason: str) -> None:
        problems.append(LineProblem(filename, line, field_name, reason))

    if not isinstance(obj, dict):
        problem("", f"expected a JSON object, got {type(obj).__name__}")
        return None, problems
    for unknown in sorted(set(obj) - FIELDS):
        problem(unknown, f"unknown field; expected some of {sorted(FIELDS)}")
    for required in REQUIRED:
        if required not in obj:
            problem(required, "missing required field")

    key = obj.get("key")
    if key is not None and (not isinstance(key, str) or not KEY_PATTERN.match(key)):
        problem("key", "must be 1-200 characters of letters, digits and . _ : / - (starting with a letter or digit)")

    prompt: list[dict[str, str]] = []
    if "prompt" in obj:
        try:
            prompt = normalise_prompt(obj["prompt"])
        except ValueError as error:
            problem("prompt", str(error))

    answer = obj.get("answer", "")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        problem("answer", f"must be a string, got {type(answer).__name__}")
        answer = ""
    answer = str(answer)

    verifier = obj.get("verifier", default_verifier)
    if not isinstance(verifier, dict) or not verifier:
        problem("verifier", "must be an object like {\"kind\": \"math\"} (or set a default on the environment)")
        verifier = {}
    else:
        try:
            verifiers.validate_config(verifier)
        except verifiers.VerifierConfigError as error:
            problem("verifier", str(error))

    domain = obj.get("domain", default_domain)
    if not isinstance(domain, str) or not domain.strip() or len(domain) > 40:
        problem("domain", "must be a non-empty string of at most 40 characters")

    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        problem("metadata", f"must be an object, got {type(metadata).__name__}")

    tools = obj.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        problem("tools", "must be a list of tool (function schema) objects")

    cost_value = obj.get("authoring_cost_usd", 0)
    cost = Decimal("0")
    if isinstance(cost_value, bool) or not isinstance(cost_value, (int, float, str)):
        problem("authoring_cost_usd", f"must be a number, got {type(cost_value).__name__}")
    else:
        try:
            cost = Decimal(str(cost_value))
            if not cost.is_finite() or cost < 0 or cost >= Decimal("1e8"):
                raise InvalidOperation
        except InvalidOperation:
            problem("authoring_cost_usd", f"must be a number of dollars between 0 and 99,999,999, got {cost_value!r}")

    if problems:
        return None, problems
    draft = TaskDraft(
        line=line,
        key=key,
        prompt=prompt,
        answer=answer,
        verifier=verifier,
        domain=domain.strip(),
        metadata=metadata,
        tools=tools,
        authoring_cost_usd=cost.quantize(Decimal("0.01")),
    )
    return draft, []


def _decode_lines(data: bytes, *, filename: str, max_line_bytes: int) -> tuple[list[tuple[int, str]], list[LineProblem]]:
    lines, problems = [], []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if len(raw) > max_line_bytes:
            problems.append(
                LineProblem(filename, number, "", f"line is {len(raw):,} bytes; the limit is {max_line_bytes:,}")
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            problems.append(
                LineProblem(filename, number, "", f"not UTF-8 text (byte {error.start + 1}); save the file as UTF-8")
            )
            continue
        if number == 1:
            text = text.removeprefix("\ufeff")
        lines.append((number, text))
    return lines, problems


def _parse_jsonl(lines, *, filename: str) -> tuple[list[tuple[int, Any]], list[LineProblem]]:
    objects, problems = [], []
    for number, text in lines:
        if not text.strip():
            continue
        try:
            objects.append((number, json.loads(text)))
        except json.JSONDecodeError as error:
            problems.append(LineProblem(filename, number, "", f"not valid JSON: {error.msg.removesuffix(' at')} at column {error.colno}"))
    return objects, problems


CSV_JSON_COLUMNS = ("verifier", "metadata", "tools")


def _parse_csv(lines, *, filename: str) -> tuple[list[tuple[int, Any]], list[LineProblem]]:
    # csv needs the text back in one piece to handle quoted newlines; line numbers come from the reader.
    text = "\n".join(line for _, line in lines)
    reader = csv.DictReader(io.StringIO(text))
    objects, problems = [], []
    try:
        for row in reader:
            number = reader.line_num
            obj: dict[str, Any] = {}
            for column, value in row.items():
                if column is None:
                    problems.append(LineProblem(filename, number, "", "more values than header columns"))
                    continue
                if value is None or value == "":
                    continue
                if column in CSV_JSON_COLUMNS or (column == "prompt" and value.lstrip().startswith("[")):
                    try:
                        value = json.loads(value)
                    except json.JSONDecodeError as error:
                        problems.append(LineProblem(filename, number, column, f"not valid JSON: {error.msg}"))
                        continue
                obj[column] = value
            objects.append((number, obj))
    except csv.Error as error:
        problems.append(LineProblem(filename, reader.line_num, "", f"not valid CSV: {error}"))
    return objects, problems


def parse_task_file(
    data: bytes,
    *,
    filename: str,
    default_verifier: dict,
    default_domain: str,
    max_file_bytes: int,
    max_line_bytes: int,
) -> tuple[list[TaskDraft], list[LineProblem]]:
    """Parse a JSONL (or .csv) task file into drafts. Any problem means: import nothing."""
    if len(data) > max_file_bytes:
        return [], [
            LineProblem(filename, 0, "", f"file is {len(data):,} bytes; the limit is {max_file_bytes:,}. Split it.")
        ]
    lines, problems = _decode_lines(data, filename=filename, max_line_bytes=max_line_bytes)
    parser = _parse_csv if filename.lower().endswith(".csv") else _parse_jsonl
    objects, parse_problems = parser(lines, filename=filename)
    problems += parse_problems
    drafts: list[TaskDraft] = []
    for number, obj in objects:
        draft, line_problems = validate_task_object(
            obj, filename=filename, line=number, default_verifier=default_verifier, default_domain=default_domain
        )
        problems += line_problems
        if draft:
            drafts.append(draft)
    seen_keys: dict[str, int] = {}
    for draft in drafts:
        if draft.key is None:
            continue
        if draft.key in seen_keys:
            problems.append(
                LineProblem(filename, draft.line, "key", f"key {draft.key!r} already used on line {seen_keys[draft.key]}")
            )
        seen_keys.setdefault(draft.key, draft.line)
    if not drafts and not problems:
        problems.append(LineProblem(filename, 0, "", "the file holds no tasks"))
    problems.sort(key=lambda item: (item.line, item.field))
    return drafts, problems
