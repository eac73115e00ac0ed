"""Campaigns: start, queue their rounds, reconcile stalled ones, pause, resume and cancel.

A running campaign keeps a window of jobs in the broker (PASSBAND_JOBS_PER_CAMPAIGN), refilled as
its items finish; cancelling or pausing leaves at most that window behind, and each of those jobs
returns after one primary-key lookup (campaign_is_running)."""

from __future__ import annotations

import logging
import math
import secrets

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from calibration import metrics
from calibration.errors import CalibrationError
from calibration.models import (
    Campaign,
    CampaignItem,
    Outcome,
    ProbeModel,
    Reprofile,
    Rollout,
)
from calibration.services.leases import stalled_items_claim
from curation import judge_master_keys
from curation.models import Environment, Task, TaskStatus, TaskVersion
from engine.verifiers.registry import kind_named

logger = logging.getLogger(__name__)

MAX_NEW_TOKENS_LIMIT = 32768


def campaign_start(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    created_by: AbstractBaseUser,
    policy: str = Campaign.Policy.FIXED,
    rollouts: int = 8,
    round_size: int = 8,
    confidence: float = 0.95,
    seed: int | None = None,
    task_versions: list[TaskVersion] | None = None,
    enqueue: bool = True,
    max_new_tokens: int | None = None,
) -> Campaign:
    """Create a campaign over the environment's current task versions and queue its first rounds.

    `rollouts` is N per task for the fixed policy and the cap for the adaptive one.
    `max_new_tokens` is each rollout's completion budget; None takes the environment's default,
    else the probe model's.
    """
    if policy not in Campaign.Policy.values:
        raise CalibrationError(f"Unknown policy {policy!r}; use adaptive or fixed.")
    if rollouts < 1 or round_size < 1:
        raise CalibrationError("Rollouts and round size must be at least 1.")
    if not 0.5 < confidence < 1:
        raise CalibrationError(f"Confidence must lie between 0.5 and 1; got {confidence}.")
    if max_new_tokens is None:
        max_new_tokens = environment.max_new_tokens or probe_model.max_new_tokens
    if not 1 <= max_new_tokens <= MAX_NEW_TOKENS_LIMIT:
        raise CalibrationError(f"Max new tokens must lie between 1 and {MAX_NEW_TOKENS_LIMIT}; got {max_new_tokens}.")
    if task_versions is None:
        task_versions = list(
            TaskVersion.objects.filter(
                pk__in=Task.objects.filter(environment=environment)
                .exclude(status__in=[TaskStatus.REJECTED])
                .values("current_version")
            )
        )
    if not task_versions:
        raise CalibrationError(f"Environment {environment.name!r} has no tasks to probe.")
    # A judge that the master keys fool (or that never met them) would pay empty answers: no campaign scores with it.
    for judge in judge_master_keys.judges_of(task_versions):
        if reason := judge_master_keys.judge_scoring_block(judge=judge):
            raise CalibrationError(f"This campaign cannot start: {reason}.")
    with transaction.atomic():
        campaign = Campaign.objects.create(
            environment=environment,
            probe_model=probe_model,
            created_by=created_by,
            policy=policy,
            seed=secrets.randbits(62) if seed is None else seed,
            round_size=round_size,
            max_rollouts=rollouts,
            confidence=confidence,
            max_new_tokens=max_new_tokens,
        )
        CampaignItem.objects.bulk_create(
            [CampaignItem(campaign=campaign, task_version=version) for version in task_versions]
        )
        if enqueue:
            transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign.pk))
    return campaign


def round_enqueue(*, campaign_id: int, task_version_ids: list[int], round_index: int) -> None:
    """Queue one round of some task versions on the `generate` queue.

    By task name: the Celery task module imports this one. The registered task honours eager
    mode and test doubles."""
    current_app.tasks["calibration.tasks.generate_rollouts"].delay(campaign_id, task_version_ids, round_index)


def campaign_enqueue_pending(*, campaign_id: int, stalled_for_seconds: float | None = None) -> int:
    """Keep the campaign's window of jobs in the broker; returns how many items this call queued.

    With `stalled_for_seconds`, first queue again the rounds that stalled (calibration/services/leases.py:
    a worker's lease that ran out, or a message lost while nothing was at work), once each. Then fill the window:
    items not yet queued go out, in order, until the campaign has `PASSBAND_JOBS_PER_CAMPAIGN` jobs out. Items at
    the same round go out together, up to `tasks_per_job` per job. Safe to call at any time: a round that is
    already generated or verified is skipped by the workers, and a campaign that is not running queues nothing.
    """
    campaign = Campaign.objects.select_related("probe_model").get(pk=campaign_id)
    if campaign.status != Campaign.Status.RUNNING:
        return 0
    queued = 0
    if stalled_for_seconds is not None:
        stalled = stalled_items_claim(campaign_id=campaign_id, stalled_for_seconds=stalled_for_seconds)
        for round_index, version_ids in _jobs(campaign.probe_model, stalled):
            round_enqueue(campaign_id=campaign_id, task_version_ids=version_ids, round_index=round_index)
            queued += len(version_ids)
        if stalled:
            # Visible on the campaign page and /metrics: something lost work that the database still knew of.
            Campaign.objects.filter(pk=campaign_id).update(
                stalled_rounds=F("stalled_rounds") + len(stalled), last_stall_at=timezone.now()
            )
            metrics.rounds_requeued(count=len(stalled))
    return queued + _window_fill(campaign)


def _jobs(probe_model: ProbeModel, rows: list[tuple], *, limit: int | None = None) -> list[tuple[int, list[int]]]:
    """(round, task version ids) per job for rows of (version id, round, verifier, tools), at most `limit` jobs."""
    groups: dict[tuple[int, int], list[int]] = {}
    for version_id, round_index, verifier, tools in rows:
        size = tasks_per_job(probe_model, verifier=verifier, tools=tools)
        groups.setdefault((round_index, size), []).append(version_id)
    jobs = []
    for (round_index, size), version_ids in groups.items():
        for start in range(0, len(version_ids), size):
            jobs.append((round_index, version_ids[start : start + size]))
    return jobs if limit is None else jobs[:limit]


def _window_fill(campaign: Campaign) -> int:
    """Queue items not yet queued until the campaign has its window of jobs out; returns items queued."""
    items = CampaignItem.objects.filter(campaign=campaign, done=False)
    out = sum(
        1 / tasks_per_job(campaign.probe_model, verifier=verifier, tools=tools)
        for verifier, tools in items.filter(queued_at__isnull=False).values_list(
            "task_version__verifier", "task_version__tools"
        )
    )
    free = settings.PASSBAND_JOBS_PER_CAMPAIGN - math.ceil(out - 1e-9)
    if free <= 0:
        return 0
    with transaction.atomic():
        # Two jobs finishing at once both fill: locked rows are skipped, so neither queues the other's.
        candidates = list(
            items.filter(queued_at__isnull=True)
            .select_for_update(skip_locked=True, of=("self",))
            .order_by("round", "task_version_id")
            .values_list("task_version_id", "round", "task_version__verifier", "task_version__tools")[
                : free * max(1, settings.PASSBAND_TASKS_PER_JOB)
            ]
        )
        jobs = _jobs(campaign.probe_model, candidates, limit=free)
        version_ids = [version_id for _, job in jobs for version_id in job]
        items.filter(task_version_id__in=version_ids).update(queued_at=timezone.now())
        for round_index, job in jobs:
            transaction.on_commit(
                lambda job=job, round_index=round_index: round_enqueue(
                    campaign_id=campaign.pk, task_version_ids=job, round_index=round_index
                )
            )
    return len(version_ids)


def campaign_accepts_rollouts(*, campaign_id: int) -> bool:
    """Inside the transaction that stores a job's rollouts: True while the campaign is running or paused.

    On PostgreSQL the campaign row is read FOR SHARE, so a cancel (an UPDATE of that row) waits for the
    insert to commit, and the insert waits for a cancel that came first and then sees it: no rollout is
    stored after its campaign's cancel has discarded the unscored ones (campaign_set_status)."""
    accepting = [Campaign.Status.RUNNING, Campaign.Status.PAUSED]
    if connection.vendor != "postgresql":  # SQLite: one writer at a time already orders the two
        return Campaign.objects.filter(pk=campaign_id, status__in=accepting).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {Campaign._meta.db_table} WHERE id = %s AND status IN (%s, %s) FOR SHARE",
            [campaign_id, *accepting],
        )
        return cursor.fetchone() is not None


def campaign_is_running(*, campaign_id: int) -> bool:
    """One primary-key lookup: what a worker asks before it takes on a job of the campaign."""
    return Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.RUNNING).exists()


def tasks_per_job(probe_model: ProbeModel, *, verifier: dict, tools: list | None) -> int:
    """How many task versions one generate (and verify) job takes on.

    Many, when sampling is a request to a server and scoring is cheap: the per-job costs (broker
    messages, queries) are then shared, and the server sees the whole batch at once. One, when the
    model runs in the worker or the verifier is slow, so no job grows past its time limit.
    """
    if probe_model.backend != ProbeModel.Backend.OPENAI or tools:
        return 1
    # A kind declares itself batchable when it scores a rollout in well under a millisecond to a few; code,
    # judges and tool episodes take seconds per rollout and keep a job per task.
    kind = kind_named((verifier or {}).get("kind"))
    if kind is None or not kind.batchable:
        return 1
    return max(1, settings.PASSBAND_TASKS_PER_JOB)


def campaigns_reconcile(*, stalled_for_seconds: float | None = None) -> int:
    """Re-queue rounds of running campaigns idle for `stalled_for_seconds` (default
    settings.PASSBAND_STALLED_AFTER); run by beat. Returns how many items were queued."""
    if stalled_for_seconds is None:
        stalled_for_seconds = settings.PASSBAND_STALLED_AFTER
    queued = 0
    for campaign_id in Campaign.objects.filter(status=Campaign.Status.RUNNING).values_list("pk", flat=True):
        if not campaign_finish_if_done(campaign_id=campaign_id):
            queued += campaign_enqueue_pending(campaign_id=campaign_id, stalled_for_seconds=stalled_for_seconds)
    # Re-profiles whose sample finished but whose next step never ran (the worker died in between).
    reprofiles_continue_enqueue(
        reprofile_ids=list(
            Reprofile.objects.filter(stage=Reprofile.Stage.SAMPLE, sample_campaign__status=Campaign.Status.DONE)
            .filter(error="")
            .values_list("pk", flat=True)
        )
    )
    return queued


def campaign_finish_if_done(*, campaign_id: int) -> bool:
    """Mark a running campaign done when none of its items is open; True if this call did.

    Run after the items' own update has committed, as one statement: of two jobs that close the
    last items at the same moment, the one that commits last then sees every item closed. (Checked
    inside each job's transaction, neither would see the other's items, and neither would finish.)
    """
    open_items = CampaignItem.objects.filter(campaign=OuterRef("pk"), done=False)
    finished = bool(
        Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.RUNNING)
        .filter(~Exists(open_items))
        .update(status=Campaign.Status.DONE, finished_at=timezone.now())
    )
    if finished:
        reprofiles_continue_enqueue(
            reprofile_ids=list(
                Reprofile.objects.filter(sample_campaign_id=campaign_id, stage=Reprofile.Stage.SAMPLE).values_list(
                    "pk", flat=True
                )
            )
        )
    return finished


def reprofiles_continue_enqueue(*, reprofile_ids: list[int]) -> None:
    """Queue the next step of these checkpoint re-profiles (their sample campaign is done), once committed.

    By task name, as round_enqueue: the step (checkpoints.checkpoint_reprofile_continue) is idempotent,
    so a second message for the same re-profile starts nothing."""
    for reprofile_id in reprofile_ids:
        transaction.on_commit(
            lambda reprofile_id=reprofile_id: current_app.tasks["calibration.tasks.continue_reprofile"].delay(
                reprofile_id
            )
        )


def campaign_set_status(*, campaign: Campaign, status: str) -> Campaign:
    """Pause, resume or cancel a campaign. Resuming queues the unfinished items again (their jobs
    were discarded while the campaign was not running). Cancelling discards the rollouts stored but
    not yet scored (outcome `discarded`, cost 0): after it every rollout of the campaign is scored or
    discarded, and no job can store another (campaign_accepts_rollouts)."""
    allowed = {
        Campaign.Status.PAUSED: {Campaign.Status.RUNNING},
        Campaign.Status.RUNNING: {Campaign.Status.PAUSED},
        Campaign.Status.CANCELLED: {Campaign.Status.RUNNING, Campaign.Status.PAUSED},
    }
    if campaign.status not in allowed.get(status, set()):
        raise CalibrationError(f"A {campaign.status} campaign cannot become {status}.")
    with transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(
            status=status, finished_at=timezone.now() if status == Campaign.Status.CANCELLED else None
        )
        if status == Campaign.Status.CANCELLED:
            Rollout.objects.filter(campaign=campaign, outcome__isnull=True).update(
                outcome=Outcome.DISCARDED, cost_usd=0, detail="discarded: the campaign was cancelled before scoring"
            )
        if status == Campaign.Status.RUNNING:
            CampaignItem.objects.filter(campaign=campaign, done=False).update(queued_at=None)
            transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign.pk))
    campaign.refresh_from_db()
    return campaign
