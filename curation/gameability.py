"""The gameability audit's writes: re-running it over an environment, its fixtures, and the reviewer's
override. The battery itself is engine.verifiers.gameability; imports and edits run it with the
reference-answer audit (curation.services.draft_audit), so a task is checked before it is probed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from curation import policy
from curation.errors import CurationError
from curation.models import Comment, Environment, Task, TaskVersion
from curation.services import gameability_audit
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.gameability import fixtures_parse


@dataclass
class GameabilityReport:
    """One run of the battery over an environment's current versions."""

    environment: str
    checked: int = 0
    gameable: list[dict] = field(default_factory=list)  # {"task", "version", "findings"} per flagged task
    not_run: list[str] = field(default_factory=list)  # tasks whose verifier the battery cannot run

    def as_dict(self) -> dict:
        return {
            "environment": self.environment,
            "checked": self.checked,
            "gameable_count": len(self.gameable),
            "gameable": self.gameable,
            "not_run": self.not_run,
        }


def environment_fixtures_set(*, environment: Environment, fixtures: object) -> Environment:
    """Replace an environment's verifier fixtures; raises CurationError naming the entry and field."""
    try:
        parsed = fixtures_parse(fixtures)
    except VerifierConfigError as error:
        raise CurationError(str(error)) from None
    environment.verifier_fixtures = parsed
    environment.save(update_fields=["verifier_fixtures"])
    return environment


def environment_gameability_check(
    *, environment: Environment, tasks: QuerySet[Task] | None = None
) -> GameabilityReport:
    """Run the battery and the environment's fixtures against each task's current version (all the
    environment's tasks, or those of `tasks`), store each verdict on its version and return the report.
    A reviewer's override stays only while the findings are the ones the reviewer saw."""
    report = GameabilityReport(environment=environment.name)
    fixtures = environment.verifier_fixtures or None
    chosen = tasks if tasks is not None else Task.objects.all()
    versions = TaskVersion.objects.filter(
        task__in=chosen.filter(environment=environment), task__current_version=F("pk")
    ).select_related("task")
    for version in versions.order_by("task__key_order", "task__key").iterator(chunk_size=200):
        result = gameability_audit(
            verifier=version.verifier,
            answer=version.answer,
            prompt=version.prompt,
            fixtures=fixtures,
            tools=version.tools,
        )
        report.checked += 1
        if result["gameable"] is None:
            report.not_run.append(version.task.key)
        elif result["gameable"]:
            report.gameable.append(
                {"task": version.task.key, "version": version.number, "findings": result["findings"]}
            )
        _version_store(version, gameable=result["gameable"], findings=result["findings"])
    return report


def _version_store(version: TaskVersion, *, gameable: bool | None, findings: list[dict]) -> None:
    changed = findings != version.gameability_findings
    version.gameable = gameable
    version.gameability_findings = findings
    fields = ["gameable", "gameability_findings"]
    if changed and version.gameable_override_at is not None:
        version.gameable_override_reason, version.gameable_override_by, version.gameable_override_at = "", None, None
        fields += ["gameable_override_reason", "gameable_override_by", "gameable_override_at"]
    version.save(update_fields=fields, allow_update=True)  # derived verdicts, not the content


@transaction.atomic
def gameable_override(*, task: Task, reviewer: AbstractBaseUser, reason: str) -> TaskVersion:
    """A reviewer accepts a gameable task's current version anyway, saying why (recorded on the version
    and as a comment); the task may then be approved."""
    if not policy.is_reviewer(reviewer):
        raise CurationError("Only reviewers and staff can override the gameability audit.")
    if not policy.task_may_review(reviewer, task):
        raise CurationError(f"{task.key} is your own task: another reviewer must judge it.")
    if not reason.strip():
        raise CurationError("Say why: a reason is required to override the gameability audit.")
    version = TaskVersion.objects.select_for_update().get(pk=task.current_version_id)
    if not version.gameable:
        raise CurationError(f"{task.key} is not flagged gameable: there is nothing to override.")
    version.gameable_override_reason = reason.strip()
    version.gameable_override_by = reviewer
    version.gameable_override_at = timezone.now()
    version.save(
        update_fields=["gameable_override_reason", "gameable_override_by", "gameable_override_at"], allow_update=True
    )
    Comment.objects.create(task=task, author=reviewer, body=f"[gameable override] {reason.strip()}")
    return version


def blocks_approval(version: TaskVersion | None) -> str:
    """Why this version may not be approved on gameability grounds, or "" when it may."""
    if version is None or not version.gameable or version.gameable_override_at is not None:
        return ""
    labels = ", ".join(finding["label"] for finding in version.gameability_findings)
    return f"its verifier pays degenerate completions ({labels}); a reviewer must override with a reason first"
