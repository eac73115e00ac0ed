"""Reading task files (JSONL, CSV, Parquet, Arrow) a line or row at a time, in bounded memory.

A file is in Passband's own format, or any dataset's rows with a column mapping
(engine.task_mapping) that builds the tasks; engine.task_sources reads the rows. An import reads
a file twice: `scan_task_file` validates every line and keeps only each valid line's number,
key and content hash; `iter_task_drafts` then yields the drafts of the valid lines for writing.
Neither holds more than one line or record batch (and the keys and hashes) at a time, so a file
of 100,000 tasks costs about what its index costs, not several times its size. `parse_task_file`
does both at once for small inputs (the editor, tests). Problems name the file, line and field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from engine.task_format import LineProblem, TaskDraft, validate_task_object
from engine.task_mapping import ColumnMapping
from engine.task_sources import SourceError, TaskSource

CSV_JSON_COLUMNS = ("verifier", "metadata", "tools")
# Past this many, further problems are counted but not kept: a wholly wrong file of 100,000 lines
# must not turn into 100,000 messages in memory.
MAX_PROBLEMS_KEPT = 1000


@dataclass(frozen=True)
class LineSummary:
    """What the first pass keeps of a valid line."""

    line: int
    key: str | None
    content_hash: str


@dataclass
class Scan:
    """The first pass over a file: its valid lines' summaries and the problems found."""

    lines: list[LineSummary]
    problems: list[LineProblem]
    problems_not_kept: int = 0

    def add_problem(self, problem: LineProblem) -> None:
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(problem)
        else:
            self.problems_not_kept += 1

    @property
    def problem_count(self) -> int:
        return len(self.problems) + self.problems_not_kept


def _decoded_cells(row: dict, *, filename: str, number: int, unit: str) -> tuple[dict | None, list[LineProblem]]:
    """A CSV or Parquet row in Passband's own columns: object columns hold JSON text; empty cells are absent."""
    obj, problems = {}, []
    for column, value in row.items():
        if value is None or value == "":
            continue
        if isinstance(value, str) and (
            column in CSV_JSON_COLUMNS or (column == "prompt" and value.lstrip().startswith("["))
        ):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                problems.append(LineProblem(filename, number, column, f"not valid JSON: {error.msg}", unit))
                continue
        obj[column] = value
    return (None if problems else obj), problems


def read_task_objects(
    source: TaskSource, *, max_line_bytes: int, mapping: ColumnMapping | None = None
) -> Iterator[tuple[int, Any, list[LineProblem]]]:
    """Yield (line or row, task object or None, problems) per row: in Passband's format, or the
    rows of any dataset turned into tasks by `mapping`."""
    for number, row, problems in source.records(max_line_bytes=max_line_bytes):
        if row is None or problems:
            yield number, None, problems
        elif mapping is not None:
            yield number, *mapping.task_object(row, number=number, filename=source.filename, unit=source.unit)
        elif source.kind == "jsonl" or not isinstance(row, dict):
            yield number, row, []
        else:
            yield number, *_decoded_cells(row, filename=source.filename, number=number, unit=source.unit)


def iter_checked_drafts(
    source: TaskSource,
    *,
    default_verifier: dict,
    default_domain: str,
    max_line_bytes: int,
    mapping: ColumnMapping | None = None,
) -> Iterator[tuple[int, TaskDraft | None, list[LineProblem]]]:
    """(line or row, draft or None, problems) for every row, in file order (a preview reads the first few)."""
    for number, obj, problems in read_task_objects(source, max_line_bytes=max_line_bytes, mapping=mapping):
        if obj is None:
            yield number, None, problems
            continue
        draft, line_problems = validate_task_object(
            obj, filename=source.filename, line=number, default_verifier=default_verifier, default_domain=default_domain
        )
        if source.unit != "line":
            line_problems = [replace(problem, unit=source.unit) for problem in line_problems]
        yield number, draft, problems + line_problems


def mapping_problems(source: TaskSource, mapping: ColumnMapping, *, max_line_bytes: int) -> list[LineProblem]:
    """What stops `mapping` from reading `source` at all: an unreadable file, or columns it lacks."""
    try:
        columns = source.columns(max_line_bytes=max_line_bytes)
    except SourceError as error:
        return [LineProblem(source.filename, 0, "", str(error))]
    return mapping.column_problems(columns, filename=source.filename)


def scan_task_file(
    source: TaskSource,
    *,
    default_verifier: dict,
    default_domain: str,
    max_line_bytes: int,
    mapping: ColumnMapping | None = None,
    on_line: Callable[[int, int], None] | None = None,
) -> Scan:
    """First pass: validate every line, keep the valid lines' key and hash, and find repeated keys.

    With a `mapping`, its columns are checked against the file's first. `on_line(line,
    bytes_read)` is called after each line, for progress.
    """
    scan = Scan(lines=[], problems=[])
    filename, unit = source.filename, source.unit
    if mapping is not None:
        for problem in mapping_problems(source, mapping, max_line_bytes=max_line_bytes):
            scan.add_problem(problem)
        if scan.problem_count:
            return scan
    seen_keys: dict[str, int] = {}
    for number, draft, problems in iter_checked_drafts(
        source,
        default_verifier=default_verifier,
        default_domain=default_domain,
        max_line_bytes=max_line_bytes,
        mapping=mapping,
    ):
        for problem in problems:
            scan.add_problem(problem)
        if on_line is not None:
            on_line(number, source.bytes_read)
        if draft is None or problems:
            continue
        if draft.key is not None:
            if draft.key in seen_keys:
                reason = f"key {draft.key!r} already used on {unit} {seen_keys[draft.key]}"
                scan.add_problem(LineProblem(filename, number, "key", reason, unit))
                continue
            seen_keys[draft.key] = number
        scan.lines.append(LineSummary(line=number, key=draft.key, content_hash=draft.content_hash))
    if not scan.lines and not scan.problem_count:
        scan.add_problem(LineProblem(filename, 0, "", "the file holds no tasks"))
    scan.problems.sort(key=lambda item: (item.line, item.field))
    return scan


def iter_task_drafts(
    source: TaskSource,
    *,
    default_verifier: dict,
    default_domain: str,
    max_line_bytes: int,
    mapping: ColumnMapping | None = None,
) -> Iterator[TaskDraft]:
    """Second pass: the drafts of the valid lines, in file order."""
    for _, draft, problems in iter_checked_drafts(
        source,
        default_verifier=default_verifier,
        default_domain=default_domain,
        max_line_bytes=max_line_bytes,
        mapping=mapping,
    ):
        if draft is not None and not problems:
            yield draft


def parse_task_file(
    data: bytes,
    *,
    filename: str,
    default_verifier: dict,
    default_domain: str,
    max_file_bytes: int,
    max_line_bytes: int,
    mapping: ColumnMapping | None = None,
) -> tuple[list[TaskDraft], list[LineProblem]]:
    """Both passes over bytes in memory: (drafts, problems). Any problem means: import nothing."""
    if len(data) > max_file_bytes:
        return [], [
            LineProblem(filename, 0, "", f"file is {len(data):,} bytes; the limit is {max_file_bytes:,}. Split it.")
        ]
    source = TaskSource(filename=filename, data=data)
    options: dict[str, Any] = dict(
        default_verifier=default_verifier, default_domain=default_domain, max_line_bytes=max_line_bytes, mapping=mapping
    )
    scan = scan_task_file(source, **options)
    if scan.problem_count:
        return [], scan.problems
    return list(iter_task_drafts(source, **options)), []
