"""Dashboard series, computed with database aggregates: pass rates, bands over time, latency."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    F,
    FloatField,
    OuterRef,
    Q,
    Subquery,
    Value,
)
from django.db.models.functions import (
    Floor,
    Greatest,
    Least,
    TruncDay,
    TruncHour,
)
from django.utils import timezone

from calibration.models import (
    Calibration,
    Campaign,
    CampaignItem,
    Outcome,
    ProbeModel,
    Rollout,
)
from calibration.selectors.costs import cost_summary
from curation.models import Environment, Task
from engine import stats

HISTOGRAM_BINS = 20


def pass_rate_histogram(*, environment: Environment | None, probe_model: ProbeModel | None) -> dict:
    """Counts of current task versions per pass-rate bin (width 1/20) and band."""
    # A semi-join on the current versions keeps PostgreSQL's estimates right at 100,000s of tasks.
    current_tasks = Task.objects.all() if environment is None else Task.objects.filter(environment=environment)
    calibrations = Calibration.objects.filter(
        task_version__in=current_tasks.values("current_version"), pass_rate__isnull=False
    )
    if probe_model is not None:
        calibrations = calibrations.filter(probe_model=probe_model)
    rows = (
        calibrations.annotate(
            bin=Least(
                Floor(F("pass_rate") * Value(float(HISTOGRAM_BINS))),
                Value(float(HISTOGRAM_BINS - 1)),
                output_field=FloatField(),
            )
        )
        .values("bin", "band")
        .annotate(count=Count("id"))
        .order_by("bin", "band")
    )
    series: dict[str, list[int]] = {}
    for row in rows:
        counts = series.setdefault(row["band"], [0] * HISTOGRAM_BINS)
        counts[int(row["bin"])] += row["count"]
    totals = calibrations.aggregate(tasks=Count("id"), in_band=Count("id", filter=Q(band="in_band")))
    # The spend card's own figure (selectors/costs.py): every rollout of these tasks, so the header and
    # the card on one page never disagree (a calibration's cost lags its campaign's latest rollouts).
    spend = cost_summary(environment=environment, probe_model=probe_model)
    return {
        "bin_width": 1 / HISTOGRAM_BINS,
        "bin_starts": [index / HISTOGRAM_BINS for index in range(HISTOGRAM_BINS)],
        "series": series,
        "floor": environment.floor if environment else None,
        "retire_at": environment.retire_at if environment else None,
        "tasks": totals["tasks"],
        "in_band": totals["in_band"],
        "cost_usd": sum(row["probing_usd"] for row in spend["environments"]),
    }


def model_comparison(
    *, environment: Environment, first: ProbeModel, second: ProbeModel, max_points: int = 5000
) -> dict:
    """Two probe models task by task on an environment's current versions probed by both.

    Returns scatter points (at most `max_points`, by task key), the Spearman rank correlation of
    the pass rates, and band agreement (counts per pair of bands, share agreeing, Cohen's kappa)
    computed from a database aggregate.
    """
    other = Calibration.objects.filter(probe_model=second, task_version=OuterRef("task_version"), attempts__gt=0)
    pairs = (
        Calibration.objects.filter(
            probe_model=first,
            task_version__task__environment=environment,
            task_version__task__current_version=F("task_version"),
            attempts__gt=0,
        )
        .annotate(
            second_rate=Subquery(other.values("pass_rate")[:1]),
            second_band=Subquery(other.values("band")[:1]),
        )
        .filter(second_rate__isnull=False)
    )
    band_rows = list(pairs.values("band", "second_band").annotate(count=Count("id")).order_by("band", "second_band"))
    agreement = stats.band_agreement(
        first=[row["band"] for row in band_rows for _ in range(row["count"])],
        second=[row["second_band"] for row in band_rows for _ in range(row["count"])],
    )
    rates = list(pairs.values_list("pass_rate", "second_rate"))
    points = list(
        pairs.order_by("task_version__task__key").values_list(
            "task_version__task__key", "pass_rate", "second_rate", "band", "second_band"
        )[:max_points]
    )
    return {
        "environment": environment.name,
        "first": first.name,
        "second": second.name,
        "tasks": len(rates),
        "points": {
            "key": [point[0] for point in points],
            "first": [point[1] for point in points],
            "second": [point[2] for point in points],
            "first_band": [point[3] for point in points],
            "second_band": [point[4] for point in points],
        },
        "spearman": stats.spearman_correlation(first=[r[0] for r in rates], second=[r[1] for r in rates]),
        "band_agreement": {
            "tasks": agreement.tasks,
            "agreement": agreement.agreement,
            "cohen_kappa": agreement.cohen_kappa,
            "counts": [
                {"first": row["band"], "second": row["second_band"], "count": row["count"]} for row in band_rows
            ],
        },
        "floor": environment.floor,
        "retire_at": environment.retire_at,
    }


PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


class PercentileCont(Aggregate):
    """percentile_cont(fraction) WITHIN GROUP (ORDER BY expression): an interpolated percentile."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, *, fraction: float, **extra):
        if not 0 <= fraction <= 1:
            raise ValueError("fraction must lie in [0, 1]")
        super().__init__(expression, fraction=float(fraction), **extra)


# Calibrations of current versions are reached from the task side (task -> current version ->
# calibration): one join condition per table keeps PostgreSQL's row estimates right, so it
# picks hash joins over 100,000s of rows instead of a nested loop.
CALIBRATION = "current_version__calibrations__"


def _current_calibrations(*, environment: Environment | None, probe_model: ProbeModel | None):
    """Tasks joined to their current version's calibrations; aggregate with the CALIBRATION prefix."""
    # One filter() call for the calibration condition: a second call on a multi-valued relation
    # would add a second join, and the aggregates would count the calibrations of every model.
    condition = {CALIBRATION + "isnull": False} if probe_model is None else {CALIBRATION + "probe_model": probe_model}
    tasks = Task.objects.filter(**condition)
    if environment is not None:
        tasks = tasks.filter(environment=environment)
    return tasks


def _environment_names() -> dict[int, str]:
    return dict(Environment.objects.values_list("pk", "name"))


def bands_over_time(*, environment: Environment | None, probe_model: ProbeModel | None, days: int = 90) -> dict:
    """Cumulative tasks per band per environment by day, dated by when each calibration last changed.

    Returns {"days": [...iso dates], "series": [{"environment", "band", "counts": [...]}, ...]}; the
    days run from the day before the first change in the window (at most `days` back) to today.
    Tasks whose calibration last changed before the window count from its first day. One
    GROUP BY query over the calibrations; the running totals are summed over the few groups.
    """
    calibrations = _current_calibrations(environment=environment, probe_model=probe_model)
    start = (timezone.now() - timedelta(days=days)).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = (
        calibrations.annotate(
            band=F(CALIBRATION + "band"),
            day=Greatest(TruncDay(CALIBRATION + "updated_at"), Value(start), output_field=DateTimeField()),
        )
        .values("environment_id", "band", "day")
        .annotate(count=Count(CALIBRATION + "id"))
        .order_by()
    )
    rows = list(rows)
    # The axis fits the data: from the day before the first change (at most `days` back) to today.
    if rows:
        start = max(start, min(row["day"] for row in rows) - timedelta(days=1))
    day_list = []
    cursor = start
    while cursor <= timezone.now():
        day_list.append(cursor.date())
        cursor += timedelta(days=1)
    index = {day: position for position, day in enumerate(day_list)}
    names = _environment_names()
    series: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        key = (names[row["environment_id"]], row["band"])
        position = index.get(row["day"].date(), 0)
        series.setdefault(key, [0] * len(day_list))[min(position, len(day_list) - 1)] += row["count"]
    result = []
    for (environment_name, band), daily in sorted(series.items()):
        total, cumulative = 0, []
        for count in daily:
            total += count
            cumulative.append(total)
        result.append({"environment": environment_name, "band": band, "counts": cumulative})
    return {"days": [day.isoformat() for day in day_list], "series": result}


def verifier_latency(*, environment: Environment | None, probe_model: ProbeModel | None, hours: int = 24) -> dict:
    """Verifier latency percentiles (p50, p90, p99 of verify_ms) and error rate per hour.

    Covers rollouts verified in the last `hours` hours. Error rate is the share of verdicts
    that are `error` or `timeout`; generation errors are not the verifier's and are left out.
    """
    since = timezone.now() - timedelta(hours=hours)
    rollouts = Rollout.objects.filter(verified_at__gte=since)
    if environment is not None:
        rollouts = rollouts.filter(campaign__environment=environment)
    if probe_model is not None:
        rollouts = rollouts.filter(probe_model=probe_model)
    verdicts = [Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.TIMEOUT, Outcome.TAMPERED]
    by_hour = rollouts.filter(outcome__in=verdicts).annotate(hour=TruncHour("verified_at"))
    counts = dict(
        # Count a column of the covering index (not the id) so the scan never visits the table.
        verdicts=Count("outcome"),
        errors=Count("outcome", filter=Q(outcome=Outcome.ERROR)),
        timeouts=Count("outcome", filter=Q(outcome=Outcome.TIMEOUT)),
        tampered=Count("outcome", filter=Q(outcome=Outcome.TAMPERED)),
    )
    if connection.vendor == "postgresql":
        percentiles = {name: PercentileCont("verify_ms", fraction=fraction) for name, fraction in PERCENTILES.items()}
        rows = list(by_hour.values("hour").annotate(**counts, **percentiles).order_by("hour"))
    else:
        # No percentile aggregate elsewhere (the embedded SQLite): the same interpolated
        # percentiles from each hour's latencies, read in one ordered pass.
        rows = list(by_hour.values("hour").annotate(**counts).order_by("hour"))
        latencies: dict = {}
        for hour, verify_ms in (
            by_hour.exclude(verify_ms__isnull=True).values_list("hour", "verify_ms").order_by("hour")
        ):
            latencies.setdefault(hour, []).append(verify_ms)
        for row in rows:
            values = latencies.get(row["hour"])
            for name, fraction in PERCENTILES.items():
                row[name] = float(np.percentile(values, 100 * fraction)) if values else None
    hours_list: list[str] = []
    series: dict[str, list[Any]] = {"p50": [], "p90": [], "p99": [], "error_rate": [], "verdicts": []}
    totals = {"verdicts": 0, "errors": 0, "timeouts": 0, "tampered": 0}
    for row in rows:
        hours_list.append(row["hour"].isoformat())
        for name in ("p50", "p90", "p99"):
            series[name].append(row[name])
        series["verdicts"].append(row["verdicts"])
        series["error_rate"].append((row["errors"] + row["timeouts"]) / row["verdicts"])
        for name in totals:
            totals[name] += row[name]
    overall_error_rate = (totals["errors"] + totals["timeouts"]) / totals["verdicts"] if totals["verdicts"] else None
    return {
        "hours": hours_list,
        **series,
        **totals,
        "error_rate_overall": overall_error_rate,
        "window_hours": hours,
        # The chart's time axis: the whole window, whole hours, so ticks read as times of day.
        "since": since.replace(minute=0, second=0, microsecond=0).isoformat(),
        "until": (timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)).isoformat(),
    }


def campaigns_progress(
    *, environment: Environment | None, probe_model: ProbeModel | None, limit: int = 12
) -> list[dict]:
    """The most recent campaigns with items done / to do / dropped (campaigns_progress_of)."""
    campaigns = Campaign.objects.select_related("environment", "probe_model")
    if environment is not None:
        campaigns = campaigns.filter(environment=environment)
    if probe_model is not None:
        campaigns = campaigns.filter(probe_model=probe_model)
    return campaigns_progress_of(campaigns=list(campaigns.order_by("-created_at")[:limit]))


def campaigns_progress_of(*, campaigns: list[Campaign]) -> list[dict]:
    """These campaigns with items done / to do / dropped: one GROUP BY over their items.

    A cancelled campaign has nothing to do: its unfinished items count as `items_dropped`."""
    counts = {
        row["campaign"]: row
        for row in CampaignItem.objects.filter(campaign__in=[campaign.pk for campaign in campaigns])
        .values("campaign")
        .annotate(total=Count("id"), done=Count("id", filter=Q(done=True)))
        .order_by()
    }
    result = []
    for campaign in campaigns:
        row = counts.get(campaign.pk, {"total": 0, "done": 0})
        open_items = row["total"] - row["done"]
        cancelled = campaign.status == Campaign.Status.CANCELLED
        result.append(
            {
                "id": campaign.pk,
                "label": f"#{campaign.pk} {campaign.environment.name} × {campaign.probe_model.name}",
                "status": campaign.status,
                "items_total": row["total"],
                "items_done": row["done"],
                "items_to_do": 0 if cancelled else open_items,
                "items_dropped": open_items if cancelled else 0,
                "percent": round(100 * row["done"] / row["total"]) if row["total"] else 100,
            }
        )
    return result


def curriculum_sweep(*, environment: Environment, probe_model: ProbeModel | None) -> list[dict[str, Any]]:
    """Pass rate per point of a reasoning-gym curriculum sweep (engine/integrations/reasoning_gym_tasks.py)
    among the environment's current versions: one row per (generator, attribute, level), with whether its
    pooled pass rate lies between the floor and the retirement line. Empty when no task came from a sweep."""
    from django.conf import settings

    from engine.integrations.reasoning_gym_tasks import curriculum_report

    versions = dict(
        Task.objects.filter(environment=environment, current_version__metadata__has_key="reasoning_gym").values_list(
            "current_version_id", "current_version__metadata"
        )
    )
    if not versions:
        return []
    calibrations = {}
    if probe_model is not None:
        calibrations = {
            row[0]: row[1:]
            for row in Calibration.objects.filter(
                probe_model=probe_model, task_version_id__in=list(versions)
            ).values_list("task_version_id", "successes", "attempts", "band")
        }
    report = curriculum_report(
        (metadata, *calibrations.get(version_id, (0, 0, None))) for version_id, metadata in versions.items()
    )
    for row in report:
        rate = row["pass_rate"]
        row["in_band"] = rate is not None and settings.PASSBAND_FLOOR <= rate <= settings.PASSBAND_RETIRE
    return report
