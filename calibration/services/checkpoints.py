"""Checkpoints of one training run: re-profile an environment's tasks for a new checkpoint.

A new checkpoint probes a small sample first; the item-response model (engine.stats.side), fitted
on the earlier checkpoints' calibrations and that sample, predicts every other task's band with a
probability. Tasks whose band is uncertain (below the level, 0.95) are probed by an adaptive
campaign; the rest keep the predicted band, stored as a calibration marked predicted. Before any
band is kept the sample tests the model (stats.prediction_check): each sampled task is predicted
without its own results; one far off and no band is predicted, every task is probed.

A re-profile is a record (calibration.models.Reprofile) that holds its settings and stage, so the
second step starts by itself once the sample's campaign is done: campaign_finish_if_done queues
`continue_reprofile`, and beat's reconcile queues it again for any re-profile whose sample is done
but whose second step never ran (a worker killed in between). The step takes the record's row lock
and checks its stage, so running it twice starts one campaign.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from scipy import special

from calibration.errors import CalibrationError
from calibration.models import Band, Calibration, Campaign, ProbeModel, Reprofile
from calibration.services.calibrations import CALIBRATION_FIELDS
from calibration.services.campaigns import campaign_start
from calibration.services.policies import PREDICTED_POLICY, thresholds_for
from curation.models import Environment, TaskStatus, TaskVersion
from engine import stats

logger = logging.getLogger(__name__)

# The ridge of the item-response fit (a weak N(0, 10) prior on difficulties and abilities).
PENALTY = 0.1


def run_checkpoints(*, probe_model: ProbeModel) -> list[ProbeModel]:
    """The checkpoints of `probe_model`'s run up to and including it, oldest first."""
    if not probe_model.run:
        raise CalibrationError(f"{probe_model.name} is not a checkpoint of a run: set its run and checkpoint step.")
    return list(
        ProbeModel.objects.filter(run=probe_model.run, checkpoint_step__lte=probe_model.checkpoint_step).order_by(
            "checkpoint_step"
        )
    )


def _scope(*, environment: Environment, task_version_ids: list[int] | None) -> list[TaskVersion]:
    if task_version_ids is not None:
        return list(TaskVersion.objects.filter(pk__in=task_version_ids).order_by("pk"))
    return list(
        TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
        .exclude(task__status=TaskStatus.REJECTED)
        .order_by("pk")
    )


def _measured(*, version_ids: list[int], models: list[ProbeModel]) -> list[tuple[int, int, int, int]]:
    """(version id, model id, successes, attempts) of probed (not predicted) calibrations."""
    return list(
        Calibration.objects.filter(
            task_version_id__in=version_ids,
            probe_model__in=models,
            attempts__gt=0,
            predicted_probability__isnull=True,
        ).values_list("task_version_id", "probe_model_id", "successes", "attempts")
    )


def checkpoint_reprofile(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    created_by: AbstractBaseUser,
    task_versions: list[TaskVersion] | None = None,
    release_id: int | None = None,
    sample: int = 50,
    level: float = 0.95,
    rollouts: int = 72,
    round_size: int = 8,
    seed: int | None = None,
) -> Reprofile:
    """Re-profile an environment's tasks (or `task_versions`, e.g. a release's) for a new checkpoint.

    `release_id` names the release `task_versions` came from (releases.selectors.release_environment_versions),
    kept on the record so the dashboard can say what the re-profile covered.

    `probe_model` is a checkpoint (its `run` and `checkpoint_step` set) with earlier checkpoints
    that probed these tasks. While it has probed fewer than `sample` of them, starts an adaptive
    campaign on a seeded random sample of the rest (stage "sample"); when that campaign is done the
    second step starts by itself (checkpoint_reprofile_continue). The second step fits the
    item-response model on every checkpoint's probed calibrations, predicts each task's band
    (stats.checkpoint_bands), stores the bands whose probability reaches `level` as predicted
    calibrations, and starts an adaptive campaign (cap `rollouts`) on the uncertain ones (stage
    "reprofile"). Called again while a re-profile waits on a finished sample, it takes the second
    step itself. Returns the Reprofile record. Raises CalibrationError when the model is no
    checkpoint, has no earlier one, or a campaign of it still probes this environment.
    """
    earlier = run_checkpoints(probe_model=probe_model)[:-1]
    if not earlier:
        raise CalibrationError(
            f"{probe_model.name} is the first checkpoint of run {probe_model.run}: "
            "probe it in full (nothing to predict from)."
        )
    try:
        with transaction.atomic():
            # One start at a time per checkpoint: two calls at once would both find nothing running, and when
            # the sample is already probed both would predict and start a campaign (the partial unique index
            # only covers re-profiles still at their sample).
            list(ProbeModel.objects.select_for_update().filter(pk=probe_model.pk).values_list("pk", flat=True))
            waiting = Reprofile.objects.filter(
                environment=environment, probe_model=probe_model, stage=Reprofile.Stage.SAMPLE
            ).first()
            _refuse_while_probing(environment=environment, probe_model=probe_model, waiting=waiting)
            if waiting is not None:  # its sample is done (or was cancelled): take the next step now
                return checkpoint_reprofile_continue(reprofile_id=waiting.pk)
            reprofile = Reprofile.objects.create(
                environment=environment,
                probe_model=probe_model,
                created_by=created_by,
                task_version_ids=None if task_versions is None else sorted(version.pk for version in task_versions),
                release_id=release_id,
                sample=sample,
                level=level,
                rollouts=rollouts,
                round_size=round_size,
                seed=seed,
            )
            return _advance(reprofile=reprofile)
    except IntegrityError:
        # Another call created it between our look and our insert: that one samples.
        waiting = Reprofile.objects.filter(
            environment=environment, probe_model=probe_model, stage=Reprofile.Stage.SAMPLE
        ).first()
        if waiting is None:
            raise
        return waiting


def _refuse_while_probing(*, environment: Environment, probe_model: ProbeModel, waiting: Reprofile | None) -> None:
    """CalibrationError when a campaign of `probe_model` still runs (or is paused) on `environment`; its
    message says whether the re-profile `waiting` on its sample goes on by itself once it is done."""
    running = Campaign.objects.filter(
        environment=environment,
        probe_model=probe_model,
        status__in=[Campaign.Status.RUNNING, Campaign.Status.PAUSED],
    ).first()
    if running is not None:
        then = (
            "the re-profile takes its next step by itself when it is done"
            if waiting is not None and waiting.sample_campaign_id == running.pk
            else "wait for it"
        )
        raise CalibrationError(
            f"Campaign {running.pk} still probes {environment.name} with {probe_model.name}: {then}."
        )


def checkpoint_reprofile_continue(*, reprofile_id: int) -> Reprofile:
    """Take a re-profile's next step if it is due; safe to run twice, or at the same time in two workers.

    Under the record's row lock: nothing while its sample campaign still runs or once the second step
    was taken; else the second step (or a new sample when the last one was cancelled)."""
    with transaction.atomic():
        reprofile = Reprofile.objects.select_for_update().get(pk=reprofile_id)
        return _advance(reprofile=reprofile)


def reprofile_mark_failed(*, reprofile_id: int, reason: str) -> None:
    """Record why a worker could not take a re-profile's next step, so beat stops queueing it."""
    Reprofile.objects.filter(pk=reprofile_id, stage=Reprofile.Stage.SAMPLE).update(
        error=reason, updated_at=timezone.now()
    )


def _advance(*, reprofile: Reprofile) -> Reprofile:
    """The next step of a locked (or just created) re-profile; see checkpoint_reprofile."""
    sample_campaign = reprofile.sample_campaign
    if reprofile.stage != Reprofile.Stage.SAMPLE or (
        sample_campaign is not None and sample_campaign.status in (Campaign.Status.RUNNING, Campaign.Status.PAUSED)
    ):
        return reprofile
    environment, probe_model = reprofile.environment, reprofile.probe_model
    checkpoints = run_checkpoints(probe_model=probe_model)
    versions = _scope(environment=environment, task_version_ids=reprofile.task_version_ids)
    if not versions:
        raise CalibrationError(f"Environment {environment.name!r} has no tasks to re-profile.")
    records = _measured(version_ids=[version.pk for version in versions], models=checkpoints)
    probed_now = {version_id for version_id, model_id, _, _ in records if model_id == probe_model.pk}
    if not any(model_id != probe_model.pk for _, model_id, _, _ in records):
        raise CalibrationError(f"No earlier checkpoint of run {probe_model.run} has probed these tasks.")
    start = functools.partial(
        campaign_start,
        environment=environment,
        probe_model=probe_model,
        created_by=reprofile.created_by,
        policy=Campaign.Policy.ADAPTIVE,
        rollouts=reprofile.rollouts,
        round_size=reprofile.round_size,
        seed=reprofile.seed,
    )
    wanted = min(reprofile.sample, len(versions))
    # A finished sample is final: tasks it could not decide (verifier errors) do not start another.
    sampled = sample_campaign is not None and sample_campaign.status == Campaign.Status.DONE
    if len(probed_now) < wanted and not sampled:
        rest = [version for version in versions if version.pk not in probed_now]
        campaign = start(task_versions=random.Random(reprofile.seed).sample(rest, wanted - len(probed_now)))
        reprofile.sample_campaign = campaign
        reprofile.tasks, reprofile.probed = len(versions), campaign.items.count()
        reprofile.error = ""
        reprofile.save(update_fields=["sample_campaign", "tasks", "probed", "error", "updated_at"])
        logger.info("re-profile of %s for %s: sample campaign %s", environment.name, probe_model.name, campaign.pk)
        return reprofile
    return _predict_and_probe(
        reprofile=reprofile,
        checkpoints=checkpoints,
        versions=versions,
        records=records,
        probed_now=probed_now,
        start=start,
    )


def _predict_and_probe(
    *,
    reprofile: Reprofile,
    checkpoints: list[ProbeModel],
    versions: list[TaskVersion],
    records: list[tuple[int, int, int, int]],
    probed_now: set[int],
    start: Callable[..., Campaign],
) -> Reprofile:
    """Fit, predict, store the sure bands and start (`start(task_versions=...)`) the uncertain ones' campaign."""
    environment, probe_model, level = reprofile.environment, reprofile.probe_model, reprofile.level
    task_index = {version.pk: index for index, version in enumerate(versions)}
    model_index = {model.pk: index for index, model in enumerate(checkpoints)}
    counts = [
        (task_index[version_id], model_index[model_id], successes, attempts)
        for version_id, model_id, successes, attempts in records
    ]
    new = model_index[probe_model.pk]
    # The sample tests the model first: a prior that is wrong (a new checkpoint that reorders the tasks, or a
    # share of them) shows in tasks it predicts badly without their own results; then nothing is predicted.
    # Short of that, every prediction is widened by the spread the sample shows beyond the model's.
    prediction = stats.predict_checkpoint(
        counts=counts,
        tasks=len(versions),
        models=len(checkpoints),
        new_model=new,
        thresholds=thresholds_for(environment),
        level=level,
        penalty=PENALTY,
    )
    ability, ability_sd, check = prediction.ability, prediction.ability_sd, prediction.check
    uncertain: list[tuple[TaskVersion, stats.CheckpointBand]] = []
    predicted: list[tuple[TaskVersion, stats.CheckpointBand]] = []
    for band in prediction.bands:
        version = versions[band.task]
        if version.pk in probed_now:
            continue
        (uncertain if band.uncertain else predicted).append((version, band))
    policy = _predicted_policy(
        probe_model=probe_model, checkpoints=checkpoints, prediction=prediction, counts=counts, level=level
    )
    with transaction.atomic():
        _predicted_store(probe_model=probe_model, predicted=predicted, policy=policy)
        campaign = None
        if uncertain:
            campaign = start(task_versions=[version for version, _ in uncertain])
        reprofile.stage = Reprofile.Stage.REPROFILE
        reprofile.reprofile_campaign = campaign
        reprofile.tasks, reprofile.predicted, reprofile.probed = len(versions), len(predicted), len(uncertain)
        reprofile.ability, reprofile.ability_sd = ability, ability_sd
        reprofile.model_check = check.as_dict()
        reprofile.error = ""
        reprofile.save()
    logger.info(
        "re-profile of %s for %s: ability %.2f ± %.2f, model check %s, %d predicted, %d to probe (campaign %s)",
        environment.name,
        probe_model.name,
        ability,
        ability_sd,
        check.as_dict(),
        len(predicted),
        len(uncertain),
        campaign.pk if campaign else None,
    )
    return reprofile


def _predicted_policy(
    *,
    probe_model: ProbeModel,
    checkpoints: list[ProbeModel],
    prediction: stats.CheckpointPrediction,
    counts: list[tuple[int, int, int, int]],
    level: float,
) -> dict:
    """The policy stored on each predicted calibration: the fit it came from and its uncertainty."""
    # Each prediction's uncertainty: the dashboard draws the re-profile's operating characteristic as the
    # mixture over the tasks' uncertainties (ten of them, at the 5th, 15th, ..., 95th percentiles).
    spread = np.hypot(
        stats.predicted_logit_sd(
            response=prediction.response, counts=counts, ability_sd=prediction.ability_sd, penalty=PENALTY
        ),
        prediction.check.misfit_sd,
    )
    return {
        "kind": PREDICTED_POLICY,
        "method": "item_response",
        "run": probe_model.run,
        "checkpoints": [model.name for model in checkpoints[:-1]],
        "ability": round(prediction.ability, 4),
        "ability_sd": round(prediction.ability_sd, 4),
        "logit_sd": round(float(np.median(spread)), 4),
        "logit_sds": [round(float(value), 4) for value in np.percentile(spread, np.arange(5, 100, 10))],
        "misfit_sd": round(prediction.check.misfit_sd, 4),
        "level": level,
    }


def _predicted_store(
    *, probe_model: ProbeModel, predicted: list[tuple[TaskVersion, stats.CheckpointBand]], policy: dict
) -> None:
    """Store each predicted band as the checkpoint's calibration: no attempts, marked predicted."""
    now = timezone.now()
    rows = [
        Calibration(
            task_version=version,
            probe_model=probe_model,
            attempts=0,
            successes=0,
            pass_rate=float(special.expit(band.predicted_logit)),
            band=Band(band.band),
            decided=True,
            predicted_probability=band.band_probability,
            policy=policy,
            updated_at=now,
        )
        for version, band in predicted
    ]
    Calibration.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["task_version", "probe_model"],
        update_fields=list(CALIBRATION_FIELDS),
    )
