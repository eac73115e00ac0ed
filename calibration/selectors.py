"""Reads for calibration pages and charts. Charts aggregate in the database, never row by row."""

from __future__ import annotations

from django.db.models import Count, F, FloatField, Q, Sum, Value
from django.db.models.functions import Floor, Least

from calibration.models import Calibration, Campaign, CampaignItem, Outcome, ProbeModel, Rollout
from curation.models import Environment

HISTOGRAM_BINS = 20


def pass_rate_histogram(*, environment: Environment | None, probe_model: ProbeModel | None) -> dict:
    """Counts of current task versions per pass-rate bin (width 1/20) and band."""
    calibrations = Calibration.objects.filter(
        task_version__task__current_version=F("task_version"), pass_rate__isnull=False
    )
    if environment is not None:
        calibrations = calibrations.filter(task_version__task__environment=environment)
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
    totals = calibrations.aggregate(
        tasks=Count("id"), cost=Sum("cost_usd"), in_band=Count("id", filter=Q(band="in_band"))
    )
    return {
        "bin_width": 1 / HISTOGRAM_BINS,
        "bin_starts": [index / HISTOGRAM_BINS for index in range(HISTOGRAM_BINS)],
        "series": series,
        "floor": environment.floor if environment else None,
        "retire_at": environment.retire_at if environment else None,
        "tasks": totals["tasks"],
        "in_band": totals["in_band"],
        "cost_usd": float(totals["cost"] or 0),
    }


def campaign_progress(*, campaign: Campaign) -> dict:
    """Items done, rollouts stored and verdicts so far, for progress bars and the CLI."""
    items = CampaignItem.objects.filter(campaign=campaign).aggregate(
        total=Count("id"), done=Count("id", filter=Q(done=True))
    )
    rollouts = Rollout.objects.filter(campaign=campaign).aggregate(
        stored=Count("id"),
        passed=Count("id", filter=Q(outcome=Outcome.PASS)),
        failed=Count("id", filter=Q(outcome=Outcome.FAIL)),
        verifier_errors=Count("id", filter=Q(outcome__in=[Outcome.ERROR, Outcome.TIMEOUT])),
        generation_errors=Count("id", filter=Q(outcome=Outcome.GENERATION_ERROR)),
        unverified=Count("id", filter=Q(outcome__isnull=True)),
        cost=Sum("cost_usd"),
    )
    return {
        "items_total": items["total"],
        "items_done": items["done"],
        "percent": round(100 * items["done"] / items["total"]) if items["total"] else 100,
        **rollouts,
        "cost": float(rollouts["cost"] or 0),
    }


def campaign_band_table(*, campaign: Campaign) -> list[tuple[str, int]]:
    """Tasks per band for the task versions of a campaign, under its probe model."""
    rows = (
        Calibration.objects.filter(
            probe_model=campaign.probe_model,
            task_version__in=CampaignItem.objects.filter(campaign=campaign).values("task_version"),
        )
        .values("band")
        .annotate(count=Count("id"))
        .order_by("band")
    )
    return [(row["band"], row["count"]) for row in rows]
