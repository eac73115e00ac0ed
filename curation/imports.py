"""Importing task files, all or nothing: validate every line, then write in one transaction."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import OuterRef, Subquery

from curation.errors import CurationError
from curation.models import (
    Environment,
    Task,
    TaskVersion,
)
from curation.policy import task_may_change
from curation.services import DraftAudit, draft_audit, generated_key, version_add, version_row, versions_written
from curation.weak_tests import weak_tests_flag
from engine import task_files
from engine.task_format import LineProblem, TaskDraft
from engine.task_mapping import ColumnMapping
from engine.task_sources import TaskSource

logger = logging.getLogger(__name__)

ENVIRONMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")


@dataclass
class ImportReport:
    """What an import did, or would have done: every problem names its file, line and field."""

    filename: str
    created: list[str] = field(default_factory=list)
    new_versions: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    audit_failures: list[str] = field(default_factory=list)
    gameable: list[str] = field(default_factory=list)  # tasks a degenerate completion earned reward on
    weak_tests: list[str] = field(default_factory=list)  # tasks whose tests let most mutants survive
    problems: list[LineProblem] = field(default_factory=list)
    problems_not_shown: int = 0  # past task_files.MAX_PROBLEMS_KEPT, problems are only counted
    unit: str = "line"  # what the problems' numbers count: "row" for Parquet and Arrow tables

    @property
    def ok(self) -> bool:
        return not self.problems and not self.problems_not_shown

    def summary(self) -> str:
        if not self.ok:
            count = len(self.problems) + self.problems_not_shown
            return f"{self.filename}: nothing imported; {count:,} problem(s) to fix."
        return (
            f"{self.filename}: {len(self.created):,} new task(s), {len(self.new_versions):,} new version(s), "
            f"{len(self.duplicates):,} duplicate(s) skipped, {len(self.audit_failures):,} audit failure(s), "
            f"{len(self.gameable):,} gameable."
        )

    def as_dict(self) -> dict:
        """JSON-ready, for a background import's stored report."""
        return {
            "filename": self.filename,
            "created": self.created,
            "new_versions": self.new_versions,
            "duplicates": self.duplicates,
            "audit_failures": self.audit_failures,
            "gameable": self.gameable,
            "weak_tests": self.weak_tests,
            "problems": [[p.filename, p.line, p.field, p.reason] for p in self.problems],
            "problems_not_shown": self.problems_not_shown,
            "unit": self.unit,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ImportReport:
        unit = data.get("unit", "line")
        return cls(
            filename=data["filename"],
            created=data["created"],
            new_versions=data["new_versions"],
            duplicates=data["duplicates"],
            audit_failures=data["audit_failures"],
            gameable=data.get("gameable", []),
            weak_tests=data.get("weak_tests", []),
            problems=[LineProblem(p[0], p[1], p[2], p[3], unit=unit) for p in data["problems"]],
            problems_not_shown=data.get("problems_not_shown", 0),
            unit=unit,
        )


class ImportRejected(CurationError):
    def __init__(self, report: ImportReport):
        super().__init__(report.summary())
        self.report = report


# Hashes and keys are looked up this many at a time: bounded queries for files of any length.
LOOKUP_CHUNK = 5000


def _chunks(items: list, size: int = LOOKUP_CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def upload_size_problem(*, filename: str, size: int) -> str | None:
    """The one upload size rule (settings.PASSBAND_MAX_UPLOAD_BYTES) for the page, background jobs
    and the command: why a file of `size` bytes is refused, or None."""
    limit = settings.PASSBAND_MAX_UPLOAD_BYTES
    if size <= limit:
        return None
    return f"{filename} is {size:,} bytes; the limit is {limit:,}. Split it."


def tasks_import(
    *,
    environment: Environment,
    owner: AbstractBaseUser,
    filename: str,
    data: bytes | None = None,
    path: str | Path | None = None,
    mapping: ColumnMapping | None = None,
    run_audits: bool = True,
    on_line: Callable[[int, int], None] | None = None,
    on_writing: Callable[[], None] | None = None,
    refuse_audit_failures: bool = False,
) -> ImportReport:
    """Import a task file (`data` in memory, or the file or `datasets` folder at `path`) into an
    environment, all or nothing. Without a `mapping` the file is in Passband's format (JSONL,
    CSV, Parquet); with one, any dataset's rows (JSONL, CSV, Parquet, Arrow) become tasks by it.

    Returns the report when every line is valid; raises ImportRejected (with the report) and
    writes nothing when any line is bad. Content already in the environment is skipped and
    listed as a duplicate; a known key with new content becomes a new version of that task.
    The file is read twice, a line at a time (engine.task_files): memory holds its keys and
    hashes, never its content. `on_line(line, bytes_read)` is called as the first pass reads, and
    `on_writing()` once the file is known good, before the write. With `refuse_audit_failures`, a draft
    whose reference answer fails its audit rejects the whole file (ImportRejected), nothing written.
    """
    source = TaskSource(filename=filename, data=data, path=Path(path) if path is not None else None)
    report = ImportReport(filename=filename, unit=source.unit)
    too_large = upload_size_problem(filename=filename, size=source.size_bytes)
    if too_large is not None:
        report.problems = [LineProblem(filename, 0, "", too_large)]
        raise ImportRejected(report)

    options = dict(
        default_verifier=environment.default_verifier,
        default_domain=environment.domain,
        max_line_bytes=settings.PASSBAND_MAX_LINE_BYTES,
        mapping=mapping,
    )
    scan = task_files.scan_task_file(source, on_line=on_line, **options)
    report.problems, report.problems_not_shown = scan.problems, scan.problems_not_kept
    if not report.ok:
        raise ImportRejected(report)

    owners_by_key = _owners_by_key(environment=environment, keys=[line.key for line in scan.lines if line.key])
    to_write = _lines_to_write(
        scan.lines, report=report, source=source, environment=environment, owner=owner, owners_by_key=owners_by_key
    )
    if report.problems:
        raise ImportRejected(report)

    # The audits run verifiers (a repository's tests take seconds): before the write, outside its transaction,
    # which on SQLite holds the one write lock every other writer waits for.
    audits, failures = (
        _drafts_audit(source, to_write=to_write, options=options, environment=environment) if run_audits else ({}, [])
    )
    if refuse_audit_failures and failures:
        report.audit_failures = failures
        report.problems = [LineProblem(report.filename, 0, "verifier", failure) for failure in failures]
        raise ImportRejected(report)
    if on_writing is not None:
        on_writing()
    with transaction.atomic():
        drafts = (draft for draft in task_files.iter_task_drafts(source, **options) if draft.line in to_write)
        _drafts_write(
            drafts,
            report=report,
            source=source,
            environment=environment,
            owner=owner,
            owners_by_key=owners_by_key,
            audits=audits,
        )
    return report


def _drafts_audit(
    source: TaskSource, *, to_write: set[int], options: dict, environment: Environment
) -> tuple[dict[int, DraftAudit], list[str]]:
    """The audit of every draft to write, by line, and the reference-answer failures among them (a pass over
    the file of its own, with no transaction open)."""
    fixtures = environment.verifier_fixtures or None
    audits: dict[int, DraftAudit] = {}
    failures: list[str] = []
    for draft in task_files.iter_task_drafts(source, **options):
        if draft.line not in to_write:
            continue
        audits[draft.line] = audit = draft_audit(draft, fixtures=fixtures)
        if audit.problems:
            failures.append(f"{_where(source, draft)}: " + "; ".join(audit.problems))
    return audits, failures


def _where(source: TaskSource, draft: TaskDraft) -> str:
    return f"{source.unit} {draft.line} ({draft.key or f'{source.unit} {draft.line}'})"


def _existing_hashes(*, environment: Environment, hashes: list[str]) -> dict[str, str]:
    """Content already in the environment, and the task that holds it (named in the report): the
    current version's task first, so a match names the task that shows this content now."""
    existing: dict[str, str] = {}
    for chunk in _chunks(hashes):
        rows = (
            TaskVersion.objects.filter(task__environment=environment, content_hash__in=chunk)
            .order_by("-task__current_version_id", "pk")
            .values_list("content_hash", "task__key")
        )
        for digest, key in rows:
            existing.setdefault(digest, key)
    return existing


def _owners_by_key(*, environment: Environment, keys: list[str]) -> dict[str, tuple[int, int]]:
    """(task pk, owner pk) of the environment's tasks with these keys."""
    owners: dict[str, tuple[int, int]] = {}
    for chunk in _chunks(keys):
        for pk, key, owner_id in Task.objects.filter(environment=environment, key__in=chunk).values_list(
            "pk", "key", "owner_id"
        ):
            owners[key] = (pk, owner_id)
    return owners


def _lines_to_write(
    lines: list[task_files.LineSummary],
    *,
    report: ImportReport,
    source: TaskSource,
    environment: Environment,
    owner: AbstractBaseUser,
    owners_by_key: dict[str, tuple[int, int]],
) -> set[int]:
    """The lines to write: not duplicates (of the environment or of an earlier line, listed in the
    report) and, for a known key, owned by `owner` (a problem in the report otherwise)."""
    existing_hashes = _existing_hashes(environment=environment, hashes=[line.content_hash for line in lines])
    seen_hashes: dict[str, int] = {}
    to_write: set[int] = set()
    for line in lines:
        where = f"{source.unit} {line.line}"
        label = line.key or where
        if line.content_hash in existing_hashes:
            report.duplicates.append(
                f"{where} ({label}): same content as task {existing_hashes[line.content_hash]} in {environment.name}"
            )
            continue
        if line.content_hash in seen_hashes:
            report.duplicates.append(
                f"{where} ({label}): same content as {source.unit} {seen_hashes[line.content_hash]}"
            )
            continue
        seen_hashes[line.content_hash] = line.line
        known = owners_by_key.get(line.key) if line.key else None
        if known is not None and not task_may_change(owner, Task(pk=known[0], owner_id=known[1])):
            report.problems.append(
                LineProblem(
                    report.filename,
                    line.line,
                    "key",
                    f"task {line.key!r} belongs to another author; choose a new key",
                    source.unit,
                )
            )
        to_write.add(line.line)
    return to_write


def _drafts_write(
    drafts: Iterable[TaskDraft],
    *,
    report: ImportReport,
    source: TaskSource,
    environment: Environment,
    owner: AbstractBaseUser,
    owners_by_key: dict[str, tuple[int, int]],
    audits: dict[int, DraftAudit],
) -> None:
    """Write the drafts with their audits (by line; none when audits were not run): new keys as new tasks
    (in batches), known keys as new versions."""
    batch: list[tuple[TaskDraft, DraftAudit | None]] = []
    for draft in drafts:
        audit = audits.get(draft.line)
        where = _where(source, draft)
        if audit is not None and audit.problems:
            report.audit_failures.append(f"{where}: " + "; ".join(audit.problems))
        if audit is not None and audit.gameable:
            report.gameable.append(f"{where}: paid " + "; ".join(item["label"] for item in audit.findings))
        if audit is not None and weak_tests_flag(audit.weak_tests):
            report.weak_tests.append(f"{where}: {weak_tests_flag(audit.weak_tests)}")
        known = owners_by_key.get(draft.key) if draft.key else None
        if known is None:
            batch.append((draft, audit))
            if len(batch) >= WRITE_BATCH:
                report.created += _tasks_create(environment=environment, owner=owner, batch=batch)
                batch = []
        else:
            task = Task.objects.get(pk=known[0])
            report.new_versions.append(task.key)
            version_add(task=task, draft=draft, created_by=owner, audit=audit)
    report.created += _tasks_create(environment=environment, owner=owner, batch=batch)
    if report.created or report.new_versions:
        versions_written(environment=environment)


# New tasks are written this many at a time: three statements per batch instead of three per task.
WRITE_BATCH = 1000


def _tasks_create(
    *, environment: Environment, owner: AbstractBaseUser, batch: list[tuple[TaskDraft, DraftAudit | None]]
) -> list[str]:
    """Create a task with its first version per draft; returns the new keys."""
    if not batch:
        return []
    tasks = Task.objects.bulk_create(
        [Task(environment=environment, key=draft.key or generated_key(environment), owner=owner) for draft, _ in batch]
    )
    TaskVersion.objects.bulk_create(
        [
            version_row(task=task, draft=draft, number=1, created_by=owner, audit=audit)
            for task, (draft, audit) in zip(tasks, batch)
        ]
    )
    # One statement points every new task at its first version (bulk_update would build a CASE per row).
    first_version = TaskVersion.objects.filter(task=OuterRef("pk"), number=1).values("pk")[:1]
    Task.objects.filter(pk__in=[task.pk for task in tasks]).update(current_version=Subquery(first_version))
    return [task.key for task in tasks]
