"""Checkpoints of one training run: re-profile an environment's tasks for a new checkpoint.

A new checkpoint probes a small sample first; the item-response model (engine.stats.side), fitted
on the earlier checkpoints' calibrations and that sample, predicts every other task's band with a
probability. Tasks whose band is uncertain (below the level, 0.95) are probed by an adaptive
campaign; the rest keep the predicted band, stored as a calibration marked predicted.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from scipy import special

from calibration.errors import CalibrationError
from calibration.models import Band, Calibration, Campaign, ProbeModel
from calibration.services.calibrations import CALIBRATION_FIELDS, PREDICTED_POLICY, thresholds_for
from calibration.services.campaigns import campaign_start
from curation.models import Environment, TaskStatus, TaskVersion
from engine import stats

logger = logging.getLogger(__name__)

# The ridge of the item-response fit (a weak N(0, 10) prior on difficulties and abilities).
PENALTY = 0.1


@dataclass(frozen=True)
class Reprofile:
    """What `checkpoint_reprofile` did.

    ``stage``: "sample" (a campaign probes a sample first; call again when it is done) or
    "reprofile" (bands predicted, the uncertain tasks' campaign started, or none needed).
    ``tasks``: the tasks in scope; ``predicted``: given a predicted band; ``probed``: sent to the
    campaign (the sample's size at the sample stage)."""

    stage: str
    campaign: Campaign | None
    tasks: int
    predicted: int
    probed: int
    ability: float | None = None
    ability_sd: float | None = None


def run_checkpoints(*, probe_model: ProbeModel) -> list[ProbeModel]:
    """The checkpoints of `probe_model`'s run up to and including it, oldest first."""
    if not probe_model.run:
        raise CalibrationError(f"{probe_model.name} is not a checkpoint of a run: set its run and checkpoint step.")
    return list(
        ProbeModel.objects.filter(run=probe_model.run, checkpoint_step__lte=probe_model.checkpoint_step).order_by(
            "checkpoint_step"
        )
    )


def _scope(*, environment: Environment, task_versions: list[TaskVersion] | None) -> list[TaskVersion]:
    if task_versions is not None:
        return sorted(task_versions, key=lambda version: version.pk)
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
    sample: int = 20,
    level: float = 0.95,
    rollouts: int = 72,
    round_size: int = 8,
    seed: int | None = None,
) -> Reprofile:
    """Re-profile an environment's tasks (or `task_versions`, e.g. a release's) for a new checkpoint.

    `probe_model` is a checkpoint (its `run` and `checkpoint_step` set) with earlier checkpoints
    that probed these tasks. While it has probed fewer than `sample` of them, starts an adaptive
    campaign on a seeded random sample of the rest (stage "sample"). Then fits the item-response
    model on every checkpoint's probed calibrations, predicts each task's band
    (stats.checkpoint_bands), stores the bands whose probability reaches `level` as predicted
    calibrations, and starts an adaptive campaign (cap `rollouts`) on the uncertain ones (stage
    "reprofile"). Raises CalibrationError when the model is no checkpoint, has no earlier one, or
    already probes this environment.
    """
    checkpoints = run_checkpoints(probe_model=probe_model)
    earlier = checkpoints[:-1]
    if not earlier:
        raise CalibrationError(
            f"{probe_model.name} is the first checkpoint of run {probe_model.run}: "
            "probe it in full (nothing to predict from)."
        )
    running = Campaign.objects.filter(
        environment=environment, probe_model=probe_model, status__in=[Campaign.Status.RUNNING, Campaign.Status.PAUSED]
    ).first()
    if running is not None:
        raise CalibrationError(
            f"Campaign {running.pk} still probes {environment.name} with {probe_model.name}: wait for it."
        )
    versions = _scope(environment=environment, task_versions=task_versions)
    if not versions:
        raise CalibrationError(f"Environment {environment.name!r} has no tasks to re-profile.")
    ids = [version.pk for version in versions]
    records = _measured(version_ids=ids, models=checkpoints)
    probed_now = {version_id for version_id, model_id, _, _ in records if model_id == probe_model.pk}
    if not any(model_id != probe_model.pk for _, model_id, _, _ in records):
        raise CalibrationError(f"No earlier checkpoint of run {probe_model.run} has probed these tasks.")
    start = functools.partial(
        campaign_start,
        environment=environment,
        probe_model=probe_model,
        created_by=created_by,
        policy=Campaign.Policy.ADAPTIVE,
        rollouts=rollouts,
        round_size=round_size,
        seed=seed,
    )
    wanted = min(sample, len(versions))
    if len(probed_now) < wanted:
        rest = [version for version in versions if version.pk not in probed_now]
        campaign = start(task_versions=random.Random(seed).sample(rest, wanted - len(probed_now)))
        logger.info("re-profile of %s for %s: sample campaign %s", environment.name, probe_model.name, campaign.pk)
        return Reprofile(
            stage="sample", campaign=campaign, tasks=len(versions), predicted=0, probed=campaign.items.count()
        )
    return _predict_and_probe(
        environment=environment,
        probe_model=probe_model,
        checkpoints=checkpoints,
        versions=versions,
        records=records,
        probed_now=probed_now,
        level=level,
        start=start,
    )


def _predict_and_probe(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    checkpoints: list[ProbeModel],
    versions: list[TaskVersion],
    records: list[tuple[int, int, int, int]],
    probed_now: set[int],
    level: float,
    start: Callable[..., Campaign],
) -> Reprofile:
    """Fit, predict, store the sure bands and start (`start(task_versions=...)`) the uncertain ones' campaign."""
    task_index = {version.pk: index for index, version in enumerate(versions)}
    model_index = {model.pk: index for index, model in enumerate(checkpoints)}
    counts = [
        (task_index[version_id], model_index[model_id], successes, attempts)
        for version_id, model_id, successes, attempts in records
    ]
    response = stats.fit_item_response(counts=counts, tasks=len(versions), models=len(checkpoints), penalty=PENALTY)
    new = model_index[probe_model.pk]
    ability = float(response.ability[new])
    ability_sd = stats.ability_sd(response=response, counts=counts, model=new, penalty=PENALTY)
    bands = stats.checkpoint_bands(
        response=response,
        counts=counts,
        ability=ability,
        ability_sd=ability_sd,
        thresholds=thresholds_for(environment),
        level=level,
        penalty=PENALTY,
    )
    uncertain: list[tuple[TaskVersion, stats.CheckpointBand]] = []
    predicted: list[tuple[TaskVersion, stats.CheckpointBand]] = []
    for band in bands:
        version = versions[band.task]
        if version.pk in probed_now:
            continue
        (uncertain if band.uncertain else predicted).append((version, band))
    # The typical uncertainty of a prediction: the dashboard draws the re-profile's operating characteristic with it.
    spread = stats.predicted_logit_sd(response=response, counts=counts, ability_sd=ability_sd, penalty=PENALTY)
    policy = {
        "kind": PREDICTED_POLICY,
        "method": "item_response",
        "run": probe_model.run,
        "checkpoints": [model.name for model in checkpoints[:-1]],
        "ability": round(ability, 4),
        "ability_sd": round(ability_sd, 4),
        "logit_sd": round(float(np.median(spread)), 4),
        "level": level,
    }
    with transaction.atomic():
        _predicted_store(probe_model=probe_model, predicted=predicted, policy=policy)
        campaign = None
        if uncertain:
            campaign = start(task_versions=[version for version, _ in uncertain])
    logger.info(
        "re-profile of %s for %s: ability %.2f ± %.2f, %d predicted, %d to probe (campaign %s)",
        environment.name,
        probe_model.name,
        ability,
        ability_sd,
        len(predicted),
        len(uncertain),
        campaign.pk if campaign else None,
    )
    return Reprofile(
        stage="reprofile",
        campaign=campaign,
        tasks=len(versions),
        predicted=len(predicted),
        probed=len(uncertain),
        ability=ability,
        ability_sd=ability_sd,
    )


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
