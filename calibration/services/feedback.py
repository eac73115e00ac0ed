"""Trainer feedback: drift between training and probing, automatic retirement, and re-probing."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, Max, Q, Sum

from calibration.errors import CalibrationError
from calibration.models import (
    Band,
    Calibration,
    Campaign,
    FeedbackReport,
)
from calibration.services.campaigns import campaign_start
from calibration.services.policies import thresholds_for
from curation.errors import CurationError
from curation.models import Environment, Task, TaskStatus, TaskVersion
from curation.services import task_transition
from engine import stats

logger = logging.getLogger(__name__)


FEEDBACK_RETIRE_REASON = "feedback: retired automatically"


FEEDBACK_REVIVE_REASON = "feedback: back in band"


@dataclass(frozen=True)
class Drift:
    """A task version's pass rate under the latest checkpoint that trainers reported."""

    checkpoints: int
    latest_checkpoint: str
    latest_step: int
    attempts: int
    passes: int
    pass_rate: float
    interval_low: float
    interval_high: float
    band: str
    decided: bool


@dataclass(frozen=True)
class FeedbackOutcome:
    report: FeedbackReport
    created: bool
    drift: Drift
    task_status: str
    status_changed: bool


def feedback_drift(*, task_version: TaskVersion, environment: Environment | None = None) -> Drift | None:
    """Discounted assessment of a task version's trainer feedback (None without any).

    Reports are summed per checkpoint step; checkpoints are ranked 0, 1, 2, ... by step, so
    evidence k checkpoints older than the latest counts PASSBAND_FEEDBACK_DISCOUNT**k. `environment`: the
    task's, when the caller holds it already (saves two queries).
    """
    rows = list(
        FeedbackReport.objects.filter(task_version=task_version)
        .values("checkpoint_step")
        .annotate(attempts=Sum("attempts"), passes=Sum("passes"), name=Max("checkpoint"))
        .order_by("checkpoint_step")
    )
    if not rows:
        return None
    history = [(rank, row["attempts"], row["passes"]) for rank, row in enumerate(rows)]
    thresholds = thresholds_for(environment or task_version.task.environment)
    assessment = stats.assess_discounted(
        history=history,
        thresholds=thresholds,
        # No cap: trainers decide how much to sample; only the confidence matters here.
        policy=stats.SamplingPolicy(kind="adaptive", cap=2**31 - 1, confidence=settings.PASSBAND_FEEDBACK_CONFIDENCE),
        discount=settings.PASSBAND_FEEDBACK_DISCOUNT,
    )
    latest = rows[-1]
    return Drift(
        checkpoints=len(rows),
        latest_checkpoint=latest["name"],
        latest_step=latest["checkpoint_step"],
        attempts=assessment.attempts,
        passes=assessment.successes,
        pass_rate=assessment.pass_rate,
        interval_low=assessment.interval_low,
        interval_high=assessment.interval_high,
        band=assessment.band,
        decided=assessment.decided,
    )


def feedback_record(
    *,
    task: Task,
    reported_by: AbstractBaseUser,
    checkpoint: str,
    checkpoint_step: int,
    attempts: int,
    passes: int,
    version_number: int | None = None,
    report_id: str = "",
    source: str = "",
) -> FeedbackOutcome:
    """Store a trainer's pass counts for one task under one policy checkpoint, and act on them.

    When the discounted pass rate under the latest checkpoint is decided in the retire band, an
    approved or active task is retired (audited through task_transition, reason
    FEEDBACK_RETIRE_REASON); a task that feedback retired and that later feedback puts back in
    band is made active again. A repeated `report_id` from the same user stores nothing twice.
    `source` (e.g. the API token) is named in the audited reason of any status change.
    Raises CalibrationError for impossible counts or an unknown version.
    """
    if attempts < 1 or not 0 <= passes <= attempts:
        raise CalibrationError(f"Need attempts >= 1 and 0 <= passes <= attempts; got {passes} of {attempts}.")
    if checkpoint_step < 0 or not checkpoint.strip():
        raise CalibrationError("A checkpoint needs a name and a step >= 0.")
    if version_number is None:
        version = task.current_version
    else:
        version = task.versions.filter(number=version_number).first()
    if version is None:
        raise CalibrationError(f"Task {task.key!r} has no version {version_number or '(current)'}.")
    with transaction.atomic():
        report, created = None, True
        if report_id:
            report = FeedbackReport.objects.filter(reported_by=reported_by, report_id=report_id).first()
            created = report is None
        if report is None:
            report = FeedbackReport.objects.create(
                task_version=version,
                reported_by=reported_by,
                checkpoint=checkpoint.strip(),
                checkpoint_step=checkpoint_step,
                attempts=attempts,
                passes=passes,
                report_id=report_id,
            )
        drift = feedback_drift(task_version=report.task_version, environment=task.environment)
        assert drift is not None  # the report above is evidence
        task.refresh_from_db(fields=["status", "current_version"])
        about_current = report.task_version_id == task.current_version_id
        summary = (
            f"pass rate {drift.pass_rate:.3f} [{drift.interval_low:.3f}, {drift.interval_high:.3f}] under "
            f"{drift.latest_checkpoint} (step {drift.latest_step}), reported by {reported_by.get_username()}"
            + (f" with {source}" if source else "")
        )
        task, changed = _status_follow(task, drift=drift, decided=about_current and drift.decided, summary=summary)
    return FeedbackOutcome(report=report, created=created, drift=drift, task_status=task.status, status_changed=changed)


def reprobe_sample(
    *, probability: float, cap: int, rng: random.Random | None = None, enqueue: bool = True
) -> list[Campaign]:
    """Re-probe a random share of too-hard and retired tasks, since some revive (run by beat).

    Per environment, each current version of a retired task, or of a task whose calibration
    under the environment's latest probe model is too_hard, is picked with `probability`; the
    picked ones get one adaptive campaign (cap `cap`) with that model, owned by whoever started
    the environment's latest campaign. Returns the campaigns started.
    """
    if not 0 <= probability <= 1:
        raise CalibrationError(f"The re-probe probability must lie in [0, 1]; got {probability}.")
    rng = rng or random.Random()
    started = []
    for environment in Environment.objects.all():
        latest = (
            environment.campaigns.select_related("probe_model", "created_by").order_by("-created_at", "-pk").first()
        )
        if latest is None or probability == 0:
            continue
        too_hard = Calibration.objects.filter(
            probe_model=latest.probe_model, band=Band.TOO_HARD, task_version__task__current_version=F("task_version")
        ).values("task_version")
        candidates = (
            TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
            .filter(Q(task__status=TaskStatus.RETIRED) | Q(pk__in=too_hard))
            .exclude(task__status=TaskStatus.REJECTED)
            .order_by("pk")
        )
        picked = [version for version in candidates if rng.random() < probability]
        if picked:
            started.append(
                campaign_start(
                    environment=environment,
                    probe_model=latest.probe_model,
                    created_by=latest.created_by,
                    policy=Campaign.Policy.ADAPTIVE,
                    rollouts=cap,
                    task_versions=picked,
                    enqueue=enqueue,
                )
            )
            logger.info("re-probing %d too-hard or retired task(s) of %s", len(picked), environment.name)
    return started


def _status_follow(task: Task, *, drift: Drift, decided: bool, summary: str) -> tuple[Task, bool]:
    """Retire an approved or active task that feedback decides in the retire band, or bring back one that
    feedback retired once it is decided in band again. Returns the task and whether its status changed."""
    try:
        if decided and drift.band == Band.RETIRE and task.status in (TaskStatus.APPROVED, TaskStatus.ACTIVE):
            reason = f"{FEEDBACK_RETIRE_REASON}: {summary}"
            retired = task_transition(
                task=task, to_status=TaskStatus.RETIRED, by=None, reason=reason, at_step=drift.latest_step
            )
            return retired, True
        if decided and drift.band == Band.IN_BAND and task.status == TaskStatus.RETIRED:
            last = task.status_changes.filter(to_status=TaskStatus.RETIRED).order_by("-changed_at", "-id").first()
            if last is not None and last.reason.startswith(FEEDBACK_RETIRE_REASON):
                reason = f"{FEEDBACK_REVIVE_REASON}: {summary}"
                revived = task_transition(
                    task=task, to_status=TaskStatus.ACTIVE, by=None, reason=reason, at_step=drift.latest_step
                )
                return revived, True
    except CurationError:
        # A concurrent report moved it first; the evidence is stored either way.
        logger.info("feedback on %s: status already changed", task, exc_info=True)
        task.refresh_from_db(fields=["status"])
    return task, False
