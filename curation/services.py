"""Writes for curation: environments, task import, versions and status transitions."""

from __future__ import annotations

import io
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import OuterRef, Subquery

from curation.errors import CurationError
from curation.models import (
    Environment,
    StatusChange,
    Task,
    TaskStatus,
    TaskVersion,
)
from engine import task_files, verifiers
from engine.task_format import LineProblem, TaskDraft, validate_task_object

logger = logging.getLogger(__name__)

ENVIRONMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")


def environment_create(
    *,
    name: str,
    domain: str,
    title: str = "",
    description: str = "",
    guidelines: str = "",
    default_verifier: dict | None = None,
    floor: float | None = None,
    retire_at: float | None = None,
    max_new_tokens: int | None = None,
) -> Environment:
    """Create an environment; thresholds default to PASSBAND_FLOOR and PASSBAND_RETIRE.

    `name` is a slug (it is part of every URL of the environment's tasks): CurationError otherwise.
    `max_new_tokens` is the completion budget its probes use by default (None: the probe model's).
    """
    if not isinstance(name, str) or not ENVIRONMENT_NAME.match(name):
        raise CurationError(
            f"Environment name {name!r}: use 1-80 lowercase letters, digits, - and _, starting with a letter or digit."
        )
    floor = settings.PASSBAND_FLOOR if floor is None else floor
    retire_at = settings.PASSBAND_RETIRE if retire_at is None else retire_at
    thresholds_validate(floor=floor, retire_at=retire_at)
    _environment_fields_validate(name=name, domain=domain, default_verifier=default_verifier, max_new_tokens=max_new_tokens)
    if Environment.objects.filter(name=name).exists():
        raise CurationError(f"An environment named {name!r} already exists.")
    return Environment.objects.create(
        name=name,
        title=title or name,
        domain=domain,
        description=description,
        guidelines=guidelines,
        default_verifier=default_verifier or {},
        floor=floor,
        retire_at=retire_at,
        max_new_tokens=max_new_tokens,
    )


ENVIRONMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")


def _environment_fields_validate(*, name: str, domain: str, default_verifier: dict | None, max_new_tokens: int | None) -> None:
    if not ENVIRONMENT_NAME.match(name or ""):
        raise CurationError(
            f"name: {name!r} is not a valid name; use 1-80 letters, digits, '-' or '_', starting with a letter or digit."
        )
    if not (domain or "").strip():
        raise CurationError("domain: required (math, code, tool use, workflow...).")
    if default_verifier:
        try:
            verifiers.validate_config(default_verifier)
        except verifiers.VerifierConfigError as error:
            raise CurationError(f"default verifier: {error}") from error
    if max_new_tokens is not None and not 1 <= max_new_tokens <= 32768:
        raise CurationError(f"max new tokens: must lie between 1 and 32768; got {max_new_tokens}.")


def environment_update(
    *,
    environment: Environment,
    title: str | None = None,
    domain: str | None = None,
    description: str | None = None,
    guidelines: str | None = None,
    default_verifier: dict | None = None,
    max_new_tokens: int | None = None,
    clear_max_new_tokens: bool = False,
) -> Environment:
    """Change an environment's descriptive fields, default verifier and default completion budget
    (the arguments given; `clear_max_new_tokens` goes back to the probe model's). Thresholds change
    through calibration's environment_thresholds_set, which re-bands the tasks."""
    changes = {
        "title": title, "domain": domain, "description": description, "guidelines": guidelines,
        "default_verifier": default_verifier, "max_new_tokens": max_new_tokens,
    }
    changes = {name: value for name, value in changes.items() if value is not None}
    if clear_max_new_tokens:
        changes["max_new_tokens"] = None
    _environment_fields_validate(
        name=environment.name,
        domain=changes.get("domain", environment.domain),
        default_verifier=changes.get("default_verifier"),
        max_new_tokens=changes.get("max_new_tokens"),
    )
    for name, value in changes.items():
        setattr(environment, name, value)
    environment.save(update_fields=list(changes) or None)
    return environment


def thresholds_validate(*, floor: float, retire_at: float) -> None:
    if not 0 < floor < retire_at < 1:
        raise CurationError(f"Thresholds need 0 < floor < retire_at < 1; got floor={floor}, retire_at={retire_at}.")


@dataclass
class ImportReport:
    """What an import did, or would have done: every problem names its file, line and field."""

    filename: str
    created: list[str] = field(default_factory=list)
    new_versions: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    audit_failures: list[str] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)
    problems_not_shown: int = 0  # past task_files.MAX_PROBLEMS_KEPT, problems are only counted

    @property
    def ok(self) -> bool:
        return not self.problems and not self.problems_not_shown

    def summary(self) -> str:
        if not self.ok:
            count = len(self.problems) + self.problems_not_shown
            return f"{self.filename}: nothing imported; {count:,} problem(s) to fix."
        return (
            f"{self.filename}: {len(self.created):,} new task(s), {len(self.new_versions):,} new version(s), "
            f"{len(self.duplicates):,} duplicate(s) skipped, {len(self.audit_failures):,} audit failure(s)."
        )

    def as_dict(self) -> dict:
        """JSON-ready, for a background import's stored report."""
        return {
            "filename": self.filename, "created": self.created, "new_versions": self.new_versions,
            "duplicates": self.duplicates, "audit_failures": self.audit_failures,
            "problems": [[p.filename, p.line, p.field, p.reason] for p in self.problems],
            "problems_not_shown": self.problems_not_shown,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ImportReport:
        return cls(
            filename=data["filename"], created=data["created"], new_versions=data["new_versions"],
            duplicates=data["duplicates"], audit_failures=data["audit_failures"],
            problems=[LineProblem(*problem) for problem in data["problems"]],
            problems_not_shown=data.get("problems_not_shown", 0),
        )


class ImportRejected(CurationError):
    def __init__(self, report: ImportReport):
        super().__init__(report.summary())
        self.report = report


def _audit(draft: TaskDraft) -> list[str]:
    try:
        return verifiers.audit(verifier=draft.verifier, answer=draft.answer, prompt=draft.prompt)
    except Exception as error:  # an audit that crashes is a flag on the task, never a failed import
        logger.exception("audit crashed for task line %s", draft.line)
        return [f"audit could not run: {error}"]


# Hashes and keys are looked up this many at a time: bounded queries for files of any length.
LOOKUP_CHUNK = 5000


def _chunks(items: list, size: int = LOOKUP_CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def tasks_import(
    *,
    environment: Environment,
    owner: AbstractBaseUser,
    filename: str,
    data: bytes | None = None,
    path: str | Path | None = None,
    run_audits: bool = True,
    on_line: Callable[[int, int], None] | None = None,
    on_writing: Callable[[], None] | None = None,
) -> ImportReport:
    """Import a task file (`data` in memory, or the file at `path`) into an environment, all or nothing.

    Returns the report when every line is valid; raises ImportRejected (with the report) and
    writes nothing when any line is bad. Content already in the environment is skipped and
    listed as a duplicate; a known key with new content becomes a new version of that task.
    The file is read twice, a line at a time (engine.task_files): memory holds its keys and
    hashes, never its content. `on_line(line, bytes_read)` is called as the first pass reads, and
    `on_writing()` once the file is known good, before the write.
    """
    if (data is None) == (path is None):
        raise ValueError("pass data or path, not both")
    report = ImportReport(filename=filename)
    size = len(data) if data is not None else Path(path).stat().st_size
    if size > settings.PASSBAND_MAX_UPLOAD_BYTES:
        limit = settings.PASSBAND_MAX_UPLOAD_BYTES
        report.problems = [LineProblem(filename, 0, "", f"file is {size:,} bytes; the limit is {limit:,}. Split it.")]
        raise ImportRejected(report)

    def opened():
        return io.BytesIO(data) if data is not None else open(path, "rb")

    options = dict(
        filename=filename, default_verifier=environment.default_verifier, default_domain=environment.domain,
        max_line_bytes=settings.PASSBAND_MAX_LINE_BYTES,
    )
    with opened() as stream:
        scan = task_files.scan_task_file(stream, on_line=on_line, **options)
    report.problems, report.problems_not_shown = scan.problems, scan.problems_not_kept
    if not report.ok:
        raise ImportRejected(report)

    # Content already in the environment, and the task that holds it (named in the report): the
    # current version's task first, so a match names the task that shows this content now.
    existing_hashes: dict[str, str] = {}
    for hashes in _chunks([line.content_hash for line in scan.lines]):
        rows = (
            TaskVersion.objects.filter(task__environment=environment, content_hash__in=hashes)
            .order_by("-task__current_version_id", "pk")
            .values_list("content_hash", "task__key")
        )
        for digest, key in rows:
            existing_hashes.setdefault(digest, key)
    owners_by_key: dict[str, tuple[int, int]] = {}
    for keys in _chunks([line.key for line in scan.lines if line.key]):
        for pk, key, owner_id in Task.objects.filter(environment=environment, key__in=keys).values_list("pk", "key", "owner_id"):
            owners_by_key[key] = (pk, owner_id)
    seen_hashes: dict[str, int] = {}
    to_write: set[int] = set()
    for line in scan.lines:
        label = line.key or f"line {line.line}"
        if line.content_hash in existing_hashes:
            report.duplicates.append(
                f"line {line.line} ({label}): same content as task {existing_hashes[line.content_hash]} in {environment.name}"
            )
            continue
        if line.content_hash in seen_hashes:
            report.duplicates.append(f"line {line.line} ({label}): same content as line {seen_hashes[line.content_hash]}")
            continue
        seen_hashes[line.content_hash] = line.line
        known = owners_by_key.get(line.key) if line.key else None
        if known is not None and known[1] != owner.pk and not owner.is_staff:
            report.problems.append(
                LineProblem(filename, line.line, "key", f"task {line.key!r} belongs to another author; choose a new key")
            )
        to_write.add(line.line)
    if report.problems:
        raise ImportRejected(report)

    if on_writing is not None:
        on_writing()
    with transaction.atomic(), opened() as stream:
        batch: list[tuple[TaskDraft, list[str]]] = []
        for draft in task_files.iter_task_drafts(stream, **options):
            if draft.line not in to_write:
                continue
            audit_problems = _audit(draft) if run_audits else []
            if audit_problems:
                label = draft.key or f"line {draft.line}"
                report.audit_failures.append(f"line {draft.line} ({label}): " + "; ".join(audit_problems))
            known = owners_by_key.get(draft.key) if draft.key else None
            if known is None:
                batch.append((draft, audit_problems))
                if len(batch) >= WRITE_BATCH:
                    report.created += _tasks_create(environment=environment, owner=owner, batch=batch, audited=run_audits)
                    batch = []
            else:
                task = Task.objects.get(pk=known[0])
                report.new_versions.append(task.key)
                _version_add(task=task, draft=draft, created_by=owner, audit_problems=audit_problems if run_audits else None)
        report.created += _tasks_create(environment=environment, owner=owner, batch=batch, audited=run_audits)
    return report


# New tasks are written this many at a time: three statements per batch instead of three per task.
WRITE_BATCH = 1000


def _tasks_create(
    *, environment: Environment, owner: AbstractBaseUser, batch: list[tuple[TaskDraft, list[str]]], audited: bool
) -> list[str]:
    """Create a task with its first version per draft; returns the new keys."""
    if not batch:
        return []
    tasks = Task.objects.bulk_create(
        [Task(environment=environment, key=draft.key or _generated_key(environment), owner=owner) for draft, _ in batch]
    )
    TaskVersion.objects.bulk_create(
        [_version_row(task=task, draft=draft, number=1, created_by=owner, audit_problems=problems if audited else None)
         for task, (draft, problems) in zip(tasks, batch)]
    )
    # One statement points every new task at its first version (bulk_update would build a CASE per row).
    first_version = TaskVersion.objects.filter(task=OuterRef("pk"), number=1).values("pk")[:1]
    Task.objects.filter(pk__in=[task.pk for task in tasks]).update(current_version=Subquery(first_version))
    return [task.key for task in tasks]


def _version_row(
    *, task: Task, draft: TaskDraft, number: int, created_by: AbstractBaseUser, audit_problems: list[str] | None
) -> TaskVersion:
    return TaskVersion(
        task=task,
        number=number,
        prompt=draft.prompt,
        answer=draft.answer,
        verifier=draft.verifier,
        tools=draft.tools,
        metadata=draft.metadata,
        domain=draft.domain,
        authoring_cost_usd=draft.authoring_cost_usd,
        content_hash=draft.content_hash,
        audit_passed=None if audit_problems is None else not audit_problems,
        audit_problems=audit_problems or [],
        created_by=created_by,
    )


def _generated_key(environment: Environment) -> str:
    return f"{environment.name}-{uuid.uuid4().hex[:10]}"


def _version_add(
    *, task: Task, draft: TaskDraft, created_by: AbstractBaseUser, audit_problems: list[str] | None
) -> TaskVersion:
    number = (task.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    version = _version_row(task=task, draft=draft, number=number, created_by=created_by, audit_problems=audit_problems)
    version.save()
    task.current_version = version
    task.save(update_fields=["current_version", "updated_at"])
    return version


ALLOWED_TRANSITIONS: dict[str, set[str]] = {
    TaskStatus.DRAFT: {TaskStatus.SUBMITTED},
    TaskStatus.CHANGES_REQUESTED: {TaskStatus.SUBMITTED},
    TaskStatus.SUBMITTED: {TaskStatus.IN_REVIEW, TaskStatus.DRAFT},
    TaskStatus.IN_REVIEW: {TaskStatus.APPROVED, TaskStatus.REJECTED, TaskStatus.CHANGES_REQUESTED},
    TaskStatus.APPROVED: {TaskStatus.ACTIVE, TaskStatus.RETIRED, TaskStatus.IN_REVIEW},
    TaskStatus.ACTIVE: {TaskStatus.RETIRED},
    TaskStatus.RETIRED: {TaskStatus.ACTIVE},
    TaskStatus.REJECTED: {TaskStatus.DRAFT},
}


@transaction.atomic
def task_transition(*, task: Task, to_status: str, by: AbstractBaseUser | None, reason: str = "") -> Task:
    """Move a task to another status, if the lifecycle allows it, and record who did it and why."""
    task = Task.objects.select_for_update(of=("self",)).select_related("current_version").get(pk=task.pk)
    if to_status not in ALLOWED_TRANSITIONS.get(task.status, set()):
        raise CurationError(f"A task in status '{task.status}' cannot move to '{to_status}'.")
    if to_status == TaskStatus.SUBMITTED and task.current_version and task.current_version.audit_passed is False:
        raise CurationError("This task failed its audit; fix it before submitting: " + "; ".join(task.current_version.audit_problems))
    if to_status in {TaskStatus.REJECTED, TaskStatus.CHANGES_REQUESTED} and not reason.strip():
        raise CurationError("Say why: a comment is required to reject a task or request changes.")
    StatusChange.objects.create(task=task, from_status=task.status, to_status=to_status, changed_by=by, reason=reason)
    task.status = to_status
    task.save(update_fields=["status", "updated_at"])
    return task


EDITABLE_STATUSES = (TaskStatus.DRAFT, TaskStatus.CHANGES_REQUESTED, TaskStatus.REJECTED)


def task_version_edit(*, task: Task, by: AbstractBaseUser, content: dict, run_audit: bool = True) -> TaskVersion:
    """Save edited content as a new, re-audited version of a task (the old version stays as it was).

    `content` holds the task fields of the upload format (prompt, answer, verifier, tools,
    metadata, domain, authoring_cost_usd). Raises CurationError naming the field when it is
    invalid, when nothing changed, or when the task is not the editor's or not editable now.
    """
    if task.owner_id != by.pk and not by.is_staff:
        raise CurationError("Only the task's author can edit it.")
    if task.status not in EDITABLE_STATUSES:
        raise CurationError(f"{task.key} is {task.status}; only draft, sent-back or rejected tasks can be edited.")
    draft, problems = validate_task_object(
        content,
        filename="editor",
        line=1,
        default_verifier=task.environment.default_verifier,
        default_domain=task.environment.domain,
    )
    if problems:
        raise CurationError("; ".join(f"{problem.field}: {problem.reason}" for problem in problems))
    if task.current_version_id and task.current_version.content_hash == draft.content_hash:
        raise CurationError("Nothing changed: this content is already the current version.")
    audit_problems = _audit(draft) if run_audit else None
    with transaction.atomic():
        return _version_add(task=task, draft=draft, created_by=by, audit_problems=audit_problems)
