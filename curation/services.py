"""Writes for curation: environments, versions and status transitions (imports: curation.imports)."""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from accounts.audit import audit_record
from curation import policy
from curation.errors import CurationError
from curation.models import Environment, StatusChange, Task, TaskStatus, TaskVersion
from curation.thresholds import thresholds_validate
from curation.weak_tests import weak_tests_audit
from engine import verifiers
from engine.task_format import TaskDraft, validate_task_object
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.gameability import gameability_check

logger = logging.getLogger(__name__)

# An environment's name is part of every URL of its tasks: a slug.
ENVIRONMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")


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
    floor = settings.PASSBAND_FLOOR if floor is None else floor
    retire_at = settings.PASSBAND_RETIRE if retire_at is None else retire_at
    floor, retire_at = thresholds_validate(floor=floor, retire_at=retire_at)
    _environment_fields_validate(
        name=name, domain=domain, default_verifier=default_verifier, max_new_tokens=max_new_tokens
    )
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


def _environment_fields_validate(
    *, name: str, domain: str, default_verifier: dict | None, max_new_tokens: int | None
) -> None:
    if not ENVIRONMENT_NAME.match(name or ""):
        raise CurationError(
            f"name: {name!r} is not a valid name; "
            "use 1-80 letters, digits, '-' or '_', starting with a letter or digit."
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
    changes: dict[str, Any] = {
        "title": title,
        "domain": domain,
        "description": description,
        "guidelines": guidelines,
        "default_verifier": default_verifier,
        "max_new_tokens": max_new_tokens,
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


def version_row(
    *, task: Task, draft: TaskDraft, number: int, created_by: AbstractBaseUser, audit: DraftAudit | None
) -> TaskVersion:
    audit_problems = audit.problems if audit is not None else None
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
        declared_difficulty=draft.difficulty,
        content_hash=draft.content_hash,
        audit_passed=None if audit_problems is None else not audit_problems,
        audit_problems=audit_problems or [],
        gameable=audit.gameable if audit is not None else None,
        gameability_findings=audit.findings if audit is not None else [],
        weak_tests=audit.weak_tests if audit is not None else None,
        created_by=created_by,
    )


def generated_key(environment: Environment) -> str:
    return f"{environment.name}-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class DraftAudit:
    """A draft's audits: the reference-answer problems ([] when it passes), the gameability audit's
    findings (gameable None when it could not run, e.g. for a bad verifier config) and the weak-test
    check's result (None when it did not run: curation/weak_tests.py)."""

    problems: list[str]
    gameable: bool | None = None
    findings: list[dict[str, str]] = dataclass_field(default_factory=list)
    weak_tests: dict[str, Any] | None = None


def draft_audit(draft: TaskDraft, *, fixtures: list[dict[str, str]] | None = None) -> DraftAudit:
    """The reference-answer audit, the gameability audit (environment fixtures included) and, once the
    reference passes, the weak-test check of a draft."""
    try:
        problems = verifiers.audit(verifier=draft.verifier, answer=draft.answer, prompt=draft.prompt, tools=draft.tools)
    except Exception as error:  # an audit that crashes is a flag on the task, never a failed import
        logger.exception("audit crashed for task line %s", draft.line)
        return DraftAudit(problems=[f"audit could not run: {error}"])
    return DraftAudit(
        problems=problems,
        **gameability_audit(
            verifier=draft.verifier, answer=draft.answer, prompt=draft.prompt, fixtures=fixtures, tools=draft.tools
        ),
        weak_tests=None
        if problems
        else weak_tests_audit(verifier=draft.verifier, answer=draft.answer, prompt=draft.prompt, tools=draft.tools),
    )


def gameability_audit(
    *,
    verifier: dict[str, Any],
    answer: str | None,
    prompt: Any,
    fixtures: list[dict[str, str]] | None,
    tools: list[Any] | None = None,
) -> dict[str, Any]:
    """{"gameable": ..., "findings": [...]} of one task's verifier (`tools`: what the task offers); gameable
    None when it cannot run."""
    try:
        findings = gameability_check(verifier=verifier, answer=answer, prompt=prompt, fixtures=fixtures, tools=tools)
    except VerifierConfigError:
        return {"gameable": None, "findings": []}
    except Exception:
        logger.exception("gameability audit crashed")
        return {"gameable": None, "findings": []}
    return {"gameable": bool(findings), "findings": [finding.as_dict() for finding in findings]}


def versions_written(*, environment: Environment) -> None:
    """After the commit, queue the near-duplicate and contamination check of the environment's new versions,
    and the master-key battery of the judges its judged tasks name (curation.judge_master_keys)."""
    from curation.judge_master_keys import judge_master_keys_queue  # it reads this module's models only

    similarity_check_queue(environment=environment)
    judge_master_keys_queue(environment=environment)


def similarity_check_queue(*, environment: Environment | None, recheck: bool = False) -> None:
    """After the commit, queue the near-duplicate and contamination check of an environment (all with None).

    By name: the similarity app sits above curation. The check runs in a worker, so a slow model
    never holds up an upload; a broker that is down is logged, not raised, since what was written
    stays written (`manage.py similarity_index` catches up).
    """
    environment_id = environment.pk if environment else None

    def queue() -> None:
        try:
            current_app.tasks["similarity.tasks.index_versions"].delay(environment_id, recheck=recheck)
        except Exception:
            logger.exception("could not queue the similarity check of %s", environment or "every environment")

    transaction.on_commit(queue)


def version_add(*, task: Task, draft: TaskDraft, created_by: AbstractBaseUser, audit: DraftAudit | None) -> TaskVersion:
    number = (task.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    version = version_row(task=task, draft=draft, number=number, created_by=created_by, audit=audit)
    version.save()
    task.current_version = version
    task.save(update_fields=["current_version", "updated_at"])
    return version


# The audit log's name for each status a task moves to (accounts.audit).
STATUS_ACTIONS = {
    TaskStatus.SUBMITTED: "submit",
    TaskStatus.IN_REVIEW: "take_into_review",
    TaskStatus.CHANGES_REQUESTED: "send_back",
    TaskStatus.APPROVED: "approve",
    TaskStatus.ACTIVE: "activate",
    TaskStatus.REJECTED: "reject",
    TaskStatus.RETIRED: "retire",
    TaskStatus.DRAFT: "withdraw",
}

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
def task_transition(
    *, task: Task, to_status: str, by: AbstractBaseUser | None, reason: str = "", at_step: int | None = None
) -> Task:
    """Move a task to another status, if the lifecycle allows it, and record who did it and why
    (`at_step`: the training step of the trainer feedback that moved it, if feedback did)."""
    task = Task.objects.select_for_update(of=("self",)).select_related("current_version").get(pk=task.pk)
    if to_status not in ALLOWED_TRANSITIONS.get(task.status, set()):
        raise CurationError(f"A task in status '{task.status}' cannot move to '{to_status}'.")
    if to_status == TaskStatus.SUBMITTED and task.current_version and task.current_version.audit_passed is False:
        raise CurationError(
            "This task failed its audit; fix it before submitting: " + "; ".join(task.current_version.audit_problems)
        )
    if to_status in {TaskStatus.REJECTED, TaskStatus.CHANGES_REQUESTED} and not reason.strip():
        raise CurationError("Say why: a comment is required to reject a task or request changes.")
    StatusChange.objects.create(
        task=task, from_status=task.status, to_status=to_status, changed_by=by, reason=reason, at_step=at_step
    )
    audit_record(
        actor=by,
        action=STATUS_ACTIONS.get(to_status, to_status),
        obj=task,
        detail={"from": task.status, "to": to_status, "reason": reason},
    )
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
    if not policy.task_may_change(by, task):
        raise CurationError("Only the task's author can edit it.")
    if task.status not in EDITABLE_STATUSES:
        raise CurationError(f"{task.key} is {task.status}; only draft, sent-back or rejected tasks can be edited.")
    return task_version_write(task=task, by=by, content=content, run_audit=run_audit, action="edit")


def task_version_write(
    *, task: Task, by: AbstractBaseUser, content: dict, run_audit: bool = True, action: str
) -> TaskVersion:
    """The new, audited version of `task` from `content` (who may write it is the caller's check:
    task_version_edit for authors, review_fix for reviewers). `action` names it in the audit log."""
    draft, problems = validate_task_object(
        content,
        filename="editor",
        line=1,
        default_verifier=task.environment.default_verifier,
        default_domain=task.environment.domain,
    )
    if problems:
        raise CurationError("; ".join(f"{problem.field}: {problem.reason}" for problem in problems))
    assert draft is not None  # a draft whenever there is no problem
    if task.current_version_id and task.current_version.content_hash == draft.content_hash:
        raise CurationError("Nothing changed: this content is already the current version.")
    fixtures = task.environment.verifier_fixtures or None
    audit = draft_audit(draft, fixtures=fixtures) if run_audit else None
    with transaction.atomic():
        version = version_add(task=task, draft=draft, created_by=by, audit=audit)
        versions_written(environment=task.environment)
        audit_record(actor=by, action=action, obj=task, detail={"version": version.number})
    return version
