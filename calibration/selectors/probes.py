"""Before a probe starts: which task versions it covers, what it should cost and take, and whether
the same environment and model are already being probed."""

from __future__ import annotations

import random
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Avg, Count, Max, Min

from calibration.models import Campaign, ProbeModel, Rollout
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
    `filter`: the tasks the task list shows `user` for `filters` (band, status, search, flag, mine).
    """
    if scope == "filter":
        filters = filters or {}
        tasks = tasks_with_calibration(
            user=user,
            environment=environment,
            probe_model=probe_model,
            band=filters.get("band", ""),
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


def probe_estimate(*, probe_model: ProbeModel, tasks: int, rollouts: int, max_new_tokens: int) -> dict:
    """What a probe of `tasks` tasks with `rollouts` each should cost and take, from this model's
    stored rollouts (mean cost per rollout; the rate of its most recent campaign).

    With no history, the cost is the token price of every rollout spending its whole budget and
    the time is unknown (None). An adaptive probe stops early, so these are upper bounds for it.
    """
    count = tasks * rollouts
    history = Rollout.objects.filter(probe_model=probe_model).aggregate(
        rollouts=Count("id"), cost=Avg("cost_usd"), output_tokens=Avg("output_tokens")
    )
    if history["rollouts"]:
        # Output-token prices scale with the budget only if rollouts used to hit it; keep the mean.
        cost = Decimal(history["cost"] or 0) * count
        basis = f"the mean of {history['rollouts']:,} stored rollouts of {probe_model.name}"
    else:
        per_rollout = (
            Decimal(200) * probe_model.usd_per_million_input_tokens
            + Decimal(max_new_tokens) * probe_model.usd_per_million_output_tokens
        ) / Decimal(1_000_000)
        cost = per_rollout * count
        basis = (
            f"token prices, every rollout using its {max_new_tokens}-token budget "
            f"(no rollouts of {probe_model.name} yet)"
        )
    seconds = None
    latest = Campaign.objects.filter(probe_model=probe_model, rollouts__isnull=False).order_by("-created_at").first()
    if latest is not None:
        span = Rollout.objects.filter(campaign=latest).aggregate(
            n=Count("id"), first=Min("created_at"), last=Max("created_at")
        )
        elapsed = (span["last"] - span["first"]).total_seconds()
        if span["n"] > 1 and elapsed > 0:
            seconds = count * elapsed / (span["n"] - 1)
    return {"rollouts": count, "cost_usd": float(cost), "seconds": seconds, "basis": basis}


def probes_running(*, environment: Environment, probe_model: ProbeModel) -> list[Campaign]:
    """Campaigns on the same environment and model that are running or paused."""
    return list(
        Campaign.objects.filter(
            environment=environment,
            probe_model=probe_model,
            status__in=[Campaign.Status.RUNNING, Campaign.Status.PAUSED],
        ).order_by("-created_at")
    )
