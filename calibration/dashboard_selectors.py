"""Reads for the dashboard charts. Each one is a handful of GROUP BY queries: no rows reach Python.

All figures are about current task versions unless said otherwise; `environment` and
`probe_model` narrow them when given. Percentiles use PostgreSQL's percentile_cont.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    F,
    FloatField,
    Q,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Greatest, TruncDay, TruncHour
from django.utils import timezone

from calibration.models import (
    Band,
    Calibration,
    Campaign,
    CampaignItem,
    Outcome,
    ProbeModel,
    Rollout,
)
from curation.models import Environment, Task

WASTE_BANDS = (Band.TOO_HARD, Band.RETIRE)


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

    Returns {"days": [...iso dates], "series": [{"environment", "band", "counts": [...]}, ...]}.
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


def cost_summary(*, environment: Environment | None, probe_model: ProbeModel | None) -> dict:
    """Per environment: authoring and probing spend, tasks, in-band tasks, and the cost of each.

    Spend by band shows the waste: probing and authoring money spent on tasks that end up too
    hard or too easy to teach anything. One GROUP BY (environment, band) query; the
    per-environment totals add up its few rows.
    """
    calibrations = _current_calibrations(environment=environment, probe_model=probe_model)
    rows = (
        calibrations.annotate(band=F(CALIBRATION + "band"))
        .values("environment_id", "band")
        .annotate(
            tasks=Count(CALIBRATION + "id"),
            probing=Coalesce(Sum(CALIBRATION + "cost_usd"), 0, output_field=FloatField()),
            authoring=Coalesce(Sum("current_version__authoring_cost_usd"), 0, output_field=FloatField()),
        )
        .order_by()
    )
    names = _environment_names()
    bands, totals = [], {}
    for row in rows:
        name = names[row["environment_id"]]
        bands.append(
            {
                "environment": name,
                "band": row["band"],
                "tasks": row["tasks"],
                "probing_usd": row["probing"],
                "authoring_usd": row["authoring"],
                "waste": row["band"] in WASTE_BANDS,
            }
        )
        total = totals.setdefault(name, {"tasks": 0, "in_band": 0, "probing": 0.0, "authoring": 0.0})
        total["tasks"] += row["tasks"]
        total["in_band"] += row["tasks"] if row["band"] == Band.IN_BAND else 0
        total["probing"] += row["probing"]
        total["authoring"] += row["authoring"]
    bands.sort(key=lambda row: (row["environment"], row["band"]))
    environments = []
    for name, total in sorted(totals.items()):
        spent = total["probing"] + total["authoring"]
        environments.append(
            {
                "environment": name,
                "tasks": total["tasks"],
                "in_band": total["in_band"],
                "probing_usd": total["probing"],
                "authoring_usd": total["authoring"],
                "cost_per_task_usd": spent / total["tasks"] if total["tasks"] else None,
                "cost_per_in_band_task_usd": spent / total["in_band"] if total["in_band"] else None,
                "probing_per_task_usd": total["probing"] / total["tasks"] if total["tasks"] else None,
            }
        )
    wasted = sum(row["probing_usd"] + row["authoring_usd"] for row in bands if row["waste"])
    spent = sum(row["probing_usd"] + row["authoring_usd"] for row in bands)
    return {"environments": environments, "bands": bands, "wasted_usd": wasted, "spent_usd": spent}


def verifier_latency(
    *, environment: Environment | None, probe_model: ProbeModel | None, hours: int = 24
) -> dict:
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
    verdicts = [Outcome.PASS, Outcome.FAIL, Outcome.ERROR, Outcome.TIMEOUT]
    rows = (
        rollouts.filter(outcome__in=verdicts)
        .annotate(hour=TruncHour("verified_at"))
        .values("hour")
        .annotate(
            # Count a column of the covering index (not the id) so the scan never visits the table.
            verdicts=Count("outcome"),
            errors=Count("outcome", filter=Q(outcome=Outcome.ERROR)),
            timeouts=Count("outcome", filter=Q(outcome=Outcome.TIMEOUT)),
            p50=PercentileCont("verify_ms", fraction=0.5),
            p90=PercentileCont("verify_ms", fraction=0.9),
            p99=PercentileCont("verify_ms", fraction=0.99),
        )
        .order_by("hour")
    )
    hours_list, series = [], {"p50": [], "p90": [], "p99": [], "error_rate": [], "verdicts": []}
    totals = {"verdicts": 0, "errors": 0, "timeouts": 0}
    for row in rows:
        hours_list.append(row["hour"].isoformat())
        for name in ("p50", "p90", "p99"):
            series[name].append(row[name])
        series["verdicts"].append(row["verdicts"])
        series["error_rate"].append((row["errors"] + row["timeouts"]) / row["verdicts"])
        for name in totals:
            totals[name] += row[name]
    overall_error_rate = (totals["errors"] + totals["timeouts"]) / totals["verdicts"] if totals["verdicts"] else None
    return {"hours": hours_list, **series, **totals, "error_rate_overall": overall_error_rate, "window_hours": hours}


def campaigns_progress(*, environment: Environment | None, probe_model: ProbeModel | None, limit: int = 12) -> list[dict]:
    """The most recent campaigns with items done / total: one GROUP BY over their items."""
    campaigns = Campaign.objects.select_related("environment", "probe_model")
    if environment is not None:
        campaigns = campaigns.filter(environment=environment)
    if probe_model is not None:
        campaigns = campaigns.filter(probe_model=probe_model)
    campaigns = list(campaigns.order_by("-created_at")[:limit])
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
        result.append(
            {
                "id": campaign.pk,
                "label": f"#{campaign.pk} {campaign.environment.name} × {campaign.probe_model.name}",
                "status": campaign.status,
                "items_total": row["total"],
                "items_done": row["done"],
                "percent": round(100 * row["done"] / row["total"]) if row["total"] else 100,
            }
        )
    return result
