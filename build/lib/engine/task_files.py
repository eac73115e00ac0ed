"""Reading task files (JSONL or CSV) line by line, in bounded memory.

An import reads a file twice: `scan_task_file` validates every line and keeps only each valid
line's number, key and content hash; `iter_task_drafts` then yields the drafts of the valid lines
for writing. Neither holds more than one line (and the keys and hashes) at a time, so a file of
100,000 tasks costs about what its index costs, not several times its size. `parse_task_file`
does both at once for small inputs (the editor, tests). Problems name the file, line and field.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from engine.task_format import LineProblem, TaskDraft, validate_task_object

CSV_JSON_COLUMNS = ("verifier", "metadata", "tools")
# Past this many, further problems are counted but not kept: a wholly wrong file of 100,000 lines
# must not turn into 100,000 messages in memory.
MAX_PROBLEMS_KEPT = 1000
READ_CHUNK = 1 << 16


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


def _raw_lines(stream: IO[bytes], *, max_line_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, bytes without the newline or None when over the limit, its length)."""
    number = 0
    while True:
        raw = stream.readline(max_line_bytes + 2)
        if not raw:
            return
        number += 1
        length = len(raw)
        if not raw.endswith(b"\n") and length > max_line_bytes:
            # Over the limit: skip the rest of this line without holding it.
            while True:
                rest = stream.readline(READ_CHUNK)
                length += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, None, length
            continue
        yield number, raw.rstrip(b"\n").rstrip(b"\r"), length


def _jsonl_objects(
    stream: IO[bytes], *, filename: str, max_line_bytes: int
) -> Iterator[tuple[int, Any, list[LineProblem]]]:
    for number, raw, length in _raw_lines(stream, max_line_bytes=max_line_bytes):
        if raw is None:
            yield (
                number,
                None,
                [LineProblem(filename, number, "", f"line is {length:,} bytes; the limit is {max_line_bytes:,}")],
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            reason = f"not UTF-8 text (byte {error.start + 1}); save the file as UTF-8"
            yield number, None, [LineProblem(filename, number, "", reason)]
            continue
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        try:
            yield number, json.loads(text), []
        except json.JSONDecodeError as error:
            yield (
                number,
                None,
                [
                    LineProblem(
                        filename, number, "", f"not valid JSON: {error.msg.removesuffix(' at')} at column {error.colno}"
                    )
                ],
            )
        except RecursionError:
            yield number, None, [LineProblem(filename, number, "", "not valid JSON: nested too deeply")]


def _csv_objects(
    stream: IO[bytes], *, filename: str, max_line_bytes: int
) -> Iterator[tuple[int, Any, list[LineProblem]]]:
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    csv.field_size_limit(max_line_bytes)
    reader = csv.DictReader(text)
    try:
        for row in reader:
            number, obj, problems = reader.line_num, {}, []
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
            yield number, (None if problems else obj), problems
    except csv.Error as error:
        yield reader.line_num, None, [LineProblem(filename, reader.line_num, "", f"not valid CSV: {error}")]
    except UnicodeDecodeError as error:
        reason = f"not UTF-8 text (byte {error.start + 1} of a block); save the file as UTF-8"
        yield reader.line_num + 1, None, [LineProblem(filename, reader.line_num + 1, "", reason)]
    finally:
        text.detach()  # leave the caller's stream open


def read_task_objects(
    stream: IO[bytes], *, filename: str, max_line_bytes: int
) -> Iterator[tuple[int, Any, list[LineProblem]]]:
    """Yield (line, decoded object or None, problems) per non-blank line (JSONL) or row (.csv)."""
    reader = _csv_objects if filename.lower().endswith(".csv") else _jsonl_objects
    yield from reader(stream, filename=filename, max_line_bytes=max_line_bytes)


def _drafts(
    stream: IO[bytes], *, filename: str, default_verifier: dict, default_domain: str, max_line_bytes: int
) -> Iterator[tuple[int, TaskDraft | None, list[LineProblem]]]:
    for number, obj, problems in read_task_objects(stream, filename=filename, max_line_bytes=max_line_bytes):
        if obj is None:
            yield number, None, problems
            continue
        draft, line_problems = validate_task_object(
            obj, filename=filename, line=number, default_verifier=default_verifier, default_domain=default_domain
        )
        yield number, draft, problems + line_problems


def scan_task_file(
    stream: IO[bytes],
    *,
    filename: str,
    default_verifier: dict,
    default_domain: str,
    max_line_bytes: int,
    on_line: Callable[[int, int], None] | None = None,
) -> Scan:
    """First pass: validate every line, keep the valid lines' key and hash, and find repeated keys.

    `on_line(line, bytes_read)` is called after each line, for progress.
    """
    scan = Scan(lines=[], problems=[])
    seen_keys: dict[str, int] = {}
    for number, draft, problems in _drafts(
        stream,
        filename=filename,
        default_verifier=default_verifier,
        default_domain=default_domain,
        max_line_bytes=max_line_bytes,
    ):
        for problem in problems:
            scan.add_problem(problem)
        if on_line is not None:
            on_line(number, stream.tell())
        if draft is None or problems:
            continue
        if draft.key is not None:
            if draft.key in seen_keys:
                scan.add_problem(
                    LineProblem(
                        filename, number, "key", f"key {draft.key!r} already used on line {seen_keys[draft.key]}"
                    )
                )
                continue
            seen_keys[draft.key] = number
        scan.lines.append(LineSummary(line=number, key=draft.key, content_hash=draft.content_hash))
    if not scan.lines and not scan.problem_count:
        scan.add_problem(LineProblem(filename, 0, "", "the file holds no tasks"))
    scan.problems.sort(key=lambda item: (item.line, item.field))
    return scan


def iter_task_drafts(
    stream: IO[bytes], *, filename: str, default_verifier: dict, default_domain: str, max_line_bytes: int
) -> Iterator[TaskDraft]:
    """Second pass: the drafts of the valid lines, in file order."""
    for _, draft, problems in _drafts(
        stream,
        filename=filename,
        default_verifier=default_verifier,
        default_domain=default_domain,
        max_line_bytes=max_line_bytes,
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
) -> tuple[list[TaskDraft], list[LineProblem]]:
    """Both passes over bytes in memory: (drafts, problems). Any problem means: import nothing."""
    if len(data) > max_file_bytes:
        return [], [
            LineProblem(filename, 0, "", f"file is {len(data):,} bytes; the limit is {max_file_bytes:,}. Split it.")
        ]
    options = dict(
        filename=filename,
        default_verifier=default_verifier,
        default_domain=default_domain,
        max_line_bytes=max_line_bytes,
    )
    scan = scan_task_file(io.BytesIO(data), **options)
    if scan.problem_count:
        return [], scan.problems
    return list(iter_task_drafts(io.BytesIO(data), **options)), []
