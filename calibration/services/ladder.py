"""The model ladder: a cheap model's pass rates as a per-task prior for a stronger one."""

from __future__ import annotations

import logging

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F

from calibration.errors import CalibrationError
from calibration.models import (
    Calibration,
    Campaign,
    CampaignItem,
    ProbeModel,
)
from calibration.services.campaigns import campaign_enqueue_pending, campaign_start
from curation.models import Environment, TaskStatus, TaskVersion
from engine import stats

logger = logging.getLogger(__name__)


def _current_evidence(*, environment: Environment, probe_model: ProbeModel) -> dict[int, tuple[int, int]]:
    """(successes, attempts) per current task version of the environment under one model."""
    rows = Calibration.objects.filter(
        probe_model=probe_model,
        task_version__task__environment=environment,
        task_version__task__current_version=F("task_version"),
        attempts__gt=0,
    ).values_list("task_version_id", "successes", "attempts")
    return {version_id: (successes, attempts) for version_id, successes, attempts in rows}


def ladder_fit(
    *, environment: Environment, cheap_model: ProbeModel, strong_model: ProbeModel
) -> stats.LogitShift | None:
    """The logit shift from the cheap to the strong model, fitted on tasks both have probed (or None)."""
    cheap = _current_evidence(environment=environment, probe_model=cheap_model)
    strong = _current_evidence(environment=environment, probe_model=strong_model)
    both = sorted(cheap.keys() & strong.keys())
    return stats.fit_logit_shift(cheap=[cheap[pk] for pk in both], strong=[strong[pk] for pk in both])


def campaign_start_ladder(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    cheap_model: ProbeModel,
    created_by: AbstractBaseUser,
    rollouts: int = 256,
    round_size: int = 8,
    confidence: float = 0.95,
    seed: int | None = None,
    task_versions: list[TaskVersion] | None = None,
    enqueue: bool = True,
) -> Campaign:
    """An adaptive campaign for a strong model whose per-task priors come from a cheap model.

    The ladder (stats.fit_logit_shift) is fitted on tasks both models probed already (at least
    10: probe a sample with the strong model first); each task the cheap model probed gets
    stats.ladder_prior, the others keep the environment's prior. By default it covers current
    versions the strong model has not probed. Raises CalibrationError when no ladder can be fitted.
    """
    if probe_model.pk == cheap_model.pk:
        raise CalibrationError("The cheap and the strong model must differ.")
    ladder = ladder_fit(environment=environment, cheap_model=cheap_model, strong_model=probe_model)
    if ladder is None:
        raise CalibrationError(
            f"Too few tasks probed by both {cheap_model.name} and {probe_model.name} to fit a ladder (need 10); "
            f"probe a sample with {probe_model.name} first (calibrate --limit 20)."
        )
    cheap = _current_evidence(environment=environment, probe_model=cheap_model)
    if task_versions is None:
        task_versions = _versions_not_probed(environment=environment, probe_model=probe_model)
    with transaction.atomic():
        campaign = campaign_start(
            environment=environment,
            probe_model=probe_model,
            created_by=created_by,
            policy=Campaign.Policy.ADAPTIVE,
            rollouts=rollouts,
            round_size=round_size,
            confidence=confidence,
            seed=seed,
            task_versions=task_versions,
            enqueue=False,
        )
        priors = _ladder_priors_set(campaign=campaign, cheap=cheap, ladder=ladder)
        if enqueue:
            transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign.pk))
    logger.info(
        "ladder campaign %s: %s from %s, shift %.2f (spread %.2f, %d tasks), %d priors",
        campaign.pk,
        probe_model.name,
        cheap_model.name,
        ladder.shift,
        ladder.spread,
        ladder.tasks,
        priors,
    )
    return campaign


def _versions_not_probed(*, environment: Environment, probe_model: ProbeModel) -> list[TaskVersion]:
    """The environment's current versions (not rejected) that `probe_model` has no evidence on."""
    probed = _current_evidence(environment=environment, probe_model=probe_model)
    return list(
        TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
        .exclude(task__status=TaskStatus.REJECTED)
        .exclude(pk__in=list(probed))
        .order_by("pk")
    )


def _ladder_priors_set(*, campaign: Campaign, cheap: dict[int, tuple[int, int]], ladder: stats.LogitShift) -> int:
    """Give each of the campaign's items that the cheap model probed its ladder prior; how many got one."""
    items = list(CampaignItem.objects.filter(campaign=campaign, task_version_id__in=list(cheap)))
    for item in items:
        successes, attempts = cheap[item.task_version_id]
        prior = stats.ladder_prior(successes=successes, attempts=attempts, ladder=ladder)
        item.prior = [prior.alpha, prior.beta]
    CampaignItem.objects.bulk_update(items, ["prior"])
    return len(items)
