"""Reads of an environment's health (calibration.models.EpisodeHealth) and of its tasks' bands, for its page."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Count, F, Max, Sum
from django.utils import timezone

from calibration.models import Band, Calibration, EpisodeHealth
from curation.models import Environment
from curation.policy import tasks_visible_to


def environment_health(*, environment: Environment, hours: float = 1.0, now: datetime | None = None) -> list[dict]:
    """Per world of `environment` that ran episodes in the last `hours`: episodes attempted, those the world
    failed and their share, tool calls and the share that crashed or timed out, mean and worst reset latency
    (ms; None when no reset was timed), the last failure's message and when the world was last used.
    Ordered by world name."""
    since = (now or timezone.now()) - timedelta(hours=hours)
    rows = (
        EpisodeHealth.objects.filter(environment=environment, minute__gte=since.replace(second=0, microsecond=0))
        .values("world")
        .annotate(
            episode_count=Sum("episodes"),
            failure_count=Sum("failures"),
            tool_call_count=Sum("tool_calls"),
            tool_error_count=Sum("tool_errors"),
            reset_count=Sum("resets"),
            reset_total=Sum("reset_ms_total"),
            reset_worst=Max("reset_ms_max"),
            last_used=Max("minute"),
        )
        .order_by("world")
    )
    health = []
    for row in rows:
        last_error = (
            EpisodeHealth.objects.filter(environment=environment, world=row["world"], minute__gte=since, failures__gt=0)
            .order_by("-minute")
            .values_list("last_error", flat=True)
            .first()
        )
        episodes, failures = row["episode_count"] or 0, row["failure_count"] or 0
        tool_calls, tool_errors = row["tool_call_count"] or 0, row["tool_error_count"] or 0
        resets = row["reset_count"] or 0
        health.append(
            {
                "world": row["world"],
                "episodes": episodes,
                "failures": failures,
                "failure_rate": failures / episodes if episodes else None,
                "tool_calls": tool_calls,
                "tool_errors": tool_errors,
                "tool_error_rate": tool_errors / tool_calls if tool_calls else None,
                "reset_ms_mean": (row["reset_total"] or 0.0) / resets if resets else None,
                "reset_ms_max": row["reset_worst"] if resets else None,
                "last_error": last_error or "",
                "last_used": row["last_used"],
            }
        )
    return health


def environment_band_counts(*, environment: Environment, user: AbstractBaseUser) -> list[dict]:
    """Per probe model, the current versions of `environment`'s tasks that `user` may see, counted by band:
    [{"probe_model": name, "bands": {band: count}, "calibrated": total}], ordered by model name."""
    rows = (
        Calibration.objects.filter(
            task_version__task__environment=environment,
            task_version__task__current_version=F("task_version"),
            task_version__task__in=tasks_visible_to(user).values("pk"),
        )
        .values("probe_model__name", "band")
        .annotate(count=Count("id"))
        .order_by("probe_model__name")
    )
    models: dict[str, dict[str, int]] = {}
    for row in rows:
        models.setdefault(row["probe_model__name"], {})[row["band"]] = row["count"]
    return [
        {
            "probe_model": name,
            "bands": [(band.value, band.label, counts.get(band.value, 0)) for band in Band],
            "calibrated": sum(counts.values()),
        }
        for name, counts in models.items()
    ]
