"""Celery tasks: thin wrappers that load by id, call one service and are safe to run twice."""

import logging
import random
from contextlib import nullcontext
from datetime import timedelta

from celery import shared_task
from django.conf import settings

from calibration import services
from calibration.errors import CalibrationError, ServerUnavailable

logger = logging.getLogger(__name__)


# max_retries=None on the task: `self.retry(max_retries=None)` alone means Celery's default of 3 retries,
# after which a server down for more than a few pauses would fail the job instead of waiting for it.
@shared_task(
    bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=900, time_limit=960, max_retries=None
)
def generate_rollouts(self, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> int:
    """Queue `generate`: sample one round of some task versions, then hand it to a verify worker.

    Samples the model server failed to give are asked for again later (the same job, after a pause
    that grows to PASSBAND_SERVER_RETRY_MAX_S), for as long as the campaign runs: the campaign page
    says it is waiting for its server. Beat's reconcile re-queues the job if that message is lost."""
    try:
        with _leased(self, campaign_id, task_version_ids, round_index):
            stored = services.round_generate(
                campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index
            )
    except ServerUnavailable as error:
        if self.request.is_eager:
            raise
        pause_s = min(settings.PASSBAND_SERVER_RETRY_MAX_S, 5 * 2 ** min(self.request.retries, 10))
        raise self.retry(exc=error, countdown=pause_s * random.uniform(0.75, 1.0), max_retries=None) from error
    if stored is None:  # the campaign was paused or cancelled: drop the job
        return 0
    verify_rollouts.delay(campaign_id, task_version_ids, round_index)
    return stored


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=300, time_limit=330)
def verify_rollouts(self, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> int:
    """Queue `verify`: score the round, refresh the calibrations, and open the next round where needed."""
    with _leased(self, campaign_id, task_version_ids, round_index):
        return services.round_score_and_continue(
            campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index
        )


def _leased(task, campaign_id: int, task_version_ids: int | list[int], round_index: int):
    """The round's lease, renewed while the job runs, so beat knows this worker is at it (none when eager)."""
    if task.request.is_eager:
        return nullcontext()
    ids = [task_version_ids] if isinstance(task_version_ids, int) else task_version_ids
    return services.round_leased(campaign_id=campaign_id, task_version_ids=ids, round_index=round_index)


@shared_task(soft_time_limit=60, time_limit=90)
def reconcile_campaigns() -> int:
    """Beat: re-queue rounds and impossible-variant probes that stalled: a worker's lease ran out (it died), or
    a message was lost while no worker was at work (calibration/services/leases.py, variant_leases.py)."""
    return services.campaigns_reconcile() + services.variant_probes_reconcile()


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=600, time_limit=660)
def continue_reprofile(reprofile_id: int) -> str:
    """Queue `default`: a checkpoint re-profile's next step once its sample campaign is done (predict the
    sure bands, start the uncertain tasks' campaign). Idempotent: a second run finds the step taken."""
    try:
        return services.checkpoint_reprofile_continue(reprofile_id=reprofile_id).stage
    except CalibrationError as error:
        logger.error("re-profile %s: the next step failed: %s", reprofile_id, error)
        services.reprofile_mark_failed(reprofile_id=reprofile_id, reason=str(error))
        return "failed"
    except Exception as error:
        # Recorded too (a time limit, a fit that fails): else beat would queue the same failing step forever
        # and the API would report the re-profile in progress. Raised again so the worker logs it as failed.
        services.reprofile_mark_failed(reprofile_id=reprofile_id, reason=f"{type(error).__name__}: {error}")
        raise


@shared_task(soft_time_limit=300, time_limit=330)
def reprobe_sample() -> int:
    """Beat: re-probe a small random share of too-hard and retired tasks; returns campaigns started."""
    return len(
        services.reprobe_sample(probability=settings.PASSBAND_REPROBE_PROBABILITY, cap=settings.PASSBAND_REPROBE_CAP)
    )


@shared_task(soft_time_limit=600, time_limit=660)
def draw_judge_samples() -> int:
    """Beat: draw judged rollouts for blind review (people check the LLM judges); returns items added."""
    return services.judge_samples_draw(
        share=settings.PASSBAND_JUDGE_SAMPLE_SHARE,
        limit=settings.PASSBAND_JUDGE_SAMPLE_LIMIT,
        seed=settings.PASSBAND_JUDGE_SAMPLE_SEED,
    )


@shared_task(soft_time_limit=300, time_limit=360)
def prune_episode_health() -> int:
    """Beat: drop environment health rows older than PASSBAND_HEALTH_KEEP_DAYS; returns rows deleted."""
    return services.episode_health_prune(older_than=timedelta(days=settings.PASSBAND_HEALTH_KEEP_DAYS))


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=1800, time_limit=1860)
def generate_impossible_variants(self, probe_id: int) -> int:
    """Queue `generate`: derive, check, sample and grade one impossible-variant probe's variants under the
    probe's lease (safe to run twice: what is stored is not asked for again; a second message while a worker
    holds the lease is dropped). Returns the probe's id."""
    if self.request.is_eager:
        return services.variant_probe_run(probe_id=probe_id).pk
    with services.variant_probe_leased(probe_id=probe_id) as held:
        if held:
            services.variant_probe_run(probe_id=probe_id)
    return probe_id
