"""Before a probe starts: which task versions it covers, what it should cost and take, and whether
the same environment and model are already being probed."""

from __future__ import annotations

import random
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Avg, Count, Max, Sum

from calibration import costs
from calibration.models import Campaign, Outcome, ProbeModel, Rollout
from calibration.selectors.probe_rule import probe_expected_rollouts
from calibration.selectors.tasks import tasks_with_calibration
from curation.models import Environment, Task, TaskStatus

SCOPES = ("all", "sample", "filter")


def probe_task_versions(
    *,
    environment: Environment,
    scope: str = "all",
    sample_size: int = 0,
    sample_seed: int = 0,
    user: AbstractBaseUser | None = None,
    probe_model: ProbeModel | None = None,
    filters: dict | None = None,
) -> list[int]:
    """Ids of the current task versions a probe covers (rejected tasks never).

    `all`: every task of the environment. `sample`: `sample_size` of them drawn at random with
    `sample_seed` (the same seed draws the same tasks, so a confirmed sample is the one started).
    `filter`: the tasks the task list shows `user` for `filters` (band, diagnosis, status, search, flag,
    mine).
    """
    if scope == "filter":
        filters = filters or {}
        tasks = tasks_with_calibration(
            user=user,
            environment=environment,
            probe_model=probe_model,
            band=filters.get("band", ""),
            diagnosis=filters.get("diagnosis", ""),
            status=filters.get("status", ""),
            search=filters.get("q", ""),
            flag=filters.get("flag", ""),
            owner=user if filters.get("mine") else None,
        ).exclude(status=TaskStatus.REJECTED)
    else:
        tasks = Task.objects.filter(environment=environment).exclude(status=TaskStatus.REJECTED)
    version_ids = sorted(tasks.exclude(current_version=None).values_list("current_version", flat=True))
    if scope == "sample" and sample_size < len(version_ids):
        version_ids = sorted(random.Random(sample_seed).sample(version_ids, max(sample_size, 0)))
    return version_ids


def probe_estimate(
    *,
    probe_model: ProbeModel,
    tasks: int,
    rollouts: int,
    max_new_tokens: int,
    policy: str = Campaign.Policy.FIXED,
    environment: Environment | None = None,
    task_versions: list[int] | None = None,
    round_size: int = 8,
) -> dict:
    """What a probe of `tasks` tasks with `rollouts` each should cost and take (costs.probe_estimate):
    from this model's stored rollouts and the pace of its latest campaign, or from its prices.

    An adaptive probe (`policy`) of `environment`'s `task_versions` (ids) in rounds of `round_size` counts
    the rollouts the stopping rule is expected to use (probe_rule.probe_expected_rollouts), `rollouts`
    being the cap; without the versions, every task to the cap."""
    billed = Rollout.objects.filter(probe_model=probe_model).exclude(outcome=Outcome.DISCARDED)
    history = billed.aggregate(rollouts=Count("id"), cost=Avg("cost_usd"))
    requests = billed.exclude(outcome=Outcome.GENERATION_ERROR).aggregate(
        tokens=Sum("output_tokens"), ms=Sum("generation_ms"), mean_ms=Avg("generation_ms")
    )
    known = None
    if history["rollouts"]:
        known = costs.History(
            rollouts=history["rollouts"],
            mean_cost_usd=Decimal(history["cost"] or 0),
            seconds_per_rollout=_seconds_per_rollout(probe_model),
            tokens_per_second=1000 * requests["tokens"] / requests["ms"]
            if requests["tokens"] and requests["ms"]
            else None,
            request_seconds=requests["mean_ms"] / 1000 if requests["mean_ms"] else None,
        )
    expected = None
    if policy == Campaign.Policy.ADAPTIVE and environment is not None and task_versions:
        expected = probe_expected_rollouts(
            environment=environment, probe_model=probe_model, task_versions=task_versions, cap=rollouts,
            round_size=round_size,
        )  # fmt: skip
    return costs.probe_estimate(
        expected=expected,
        model_name=probe_model.name,
        price=costs.Price.of(probe_model),
        rollouts=tasks * rollouts,
        max_new_tokens=max_new_tokens,
        history=known,
        assumed_tokens_per_second=settings.PASSBAND_ESTIMATE_TOKENS_PER_SECOND,
        load_seconds=settings.PASSBAND_ESTIMATE_LOAD_SECONDS
        if probe_model.backend == ProbeModel.Backend.TRANSFORMERS
        else 0,
    ).as_dict()


def _seconds_per_rollout(probe_model: ProbeModel) -> float | None:
    """Wall seconds per rollout of the model's latest campaign: from its start to its last rollout
    stored or verified, over its rollouts. A job writes its rollouts at one instant, so the spread of
    their timestamps alone would say a whole campaign took no time."""
    latest = Campaign.objects.filter(probe_model=probe_model, rollouts__isnull=False).order_by("-created_at").first()
    if latest is None:
        return None
    span = Rollout.objects.filter(campaign=latest).aggregate(
        n=Count("id"), stored=Max("created_at"), verified=Max("verified_at")
    )
    last = max(moment for moment in (span["stored"], span["verified"]) if moment is not None)
    # Loading the model was a state of its own: not the pace of sampling.
    elapsed = (last - latest.created_at).total_seconds() - (latest.model_load_seconds or 0)
    return elapsed / span["n"] if span["n"] and elapsed > 0 else None


def probes_running(*, environment: Environment, probe_model: ProbeModel) -> list[Campaign]:
    """Campaigns on the same environment and model that are running or paused."""
    return list(
        Campaign.objects.filter(
            environment=environment,
            probe_model=probe_model,
            status__in=[Campaign.Status.RUNNING, Campaign.Status.PAUSED],
        ).order_by("-created_at")
    )
