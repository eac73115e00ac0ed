"""Reads for calibration pages and charts. Charts aggregate in the database, never row by row."""

from __future__ import annotations

from django.db.models import (
    Count,
    F,
    FloatField,
    Max,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Floor, Least

from calibration.models import (
    Calibration,
    Campaign,
    CampaignItem,
    Outcome,
    ProbeModel,
    Rollout,
)
from curation.models import Environment, Task

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


def rollouts_for_viewer(
    *, task_versions, outcome: str = "", search: str = "", probe_model: ProbeModel | None = None
):
    """Rollouts of the given task versions for the trajectory viewer, grouped by task then sample.

    `outcome` is a verdict or "unverified"; `search` matches the rollout text or the verifier detail.
    """
    rollouts = Rollout.objects.filter(task_version__in=task_versions).select_related(
        "task_version__task__environment", "probe_model"
    )
    if probe_model is not None:
        rollouts = rollouts.filter(probe_model=probe_model)
    if outcome == "unverified":
        rollouts = rollouts.filter(outcome__isnull=True)
    elif outcome:
        rollouts = rollouts.filter(outcome=outcome)
    if search:
        rollouts = rollouts.filter(Q(text__icontains=search) | Q(detail__icontains=search))
    return rollouts.order_by("task_version__task__key", "task_version_id", "probe_model__name", "campaign_id", "sample_index")


def model_comparison(
    *, environment: Environment, first: ProbeModel, second: ProbeModel, max_points: int = 5000
) -> dict:
    """Two probe models task by task on an environment's current versions probed by both.

    Returns scatter points (at most `max_points`, by task key), the Spearman rank correlation of
    the pass rates, and band agreement (counts per pair of bands, share agreeing, Cohen's kappa)
    computed from a database aggregate.
    """
    from engine import stats

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
            "counts": [{"first": row["band"], "second": row["second_band"], "count": row["count"]} for row in band_rows],
        },
        "floor": environment.floor,
        "retire_at": environment.retire_at,
    }


def _task_costs(*, environment: Environment, probe_model: ProbeModel | None):
    """Tasks of an environment annotated with what they cost, each sum in its own subquery so
    that joining versions and rollouts can never count a dollar twice."""
    from django.db.models import DecimalField
    from django.db.models.functions import Coalesce

    from curation.models import Task, TaskVersion

    money = DecimalField(max_digits=20, decimal_places=8)
    authoring = (
        TaskVersion.objects.filter(task=OuterRef("pk"))
        .order_by()
        .values("task")
        .annotate(total=Sum("authoring_cost_usd"))
        .values("total")
    )
    probing = (
        Rollout.objects.filter(task_version__task=OuterRef("pk"))
        .order_by()
        .values("task_version__task")
        .annotate(total=Sum("cost_usd"))
        .values("total")
    )
    band = Calibration.objects.filter(task_version=OuterRef("current_version"))
    if probe_model is not None:
        band = band.filter(probe_model=probe_model)
    return Task.objects.filter(environment=environment).annotate(
        authoring_usd=Coalesce(Subquery(authoring, output_field=money), Value(0, output_field=money)),
        probe_usd=Coalesce(Subquery(probing, output_field=money), Value(0, output_field=money)),
        band=Subquery(band.order_by("-updated_at").values("band")[:1]),
    )


def environment_costs(*, environment: Environment, probe_model: ProbeModel | None = None) -> dict:
    """What an environment cost: authoring (every version) plus probe compute (every rollout).

    Bands are the current versions' under `probe_model` (default: the model of the latest
    campaign). In band: band in_band and not retired or rejected. Waste: spend on tasks that
    ended too_hard or retire, or were retired. Money is returned as floats in dollars.
    """
    from curation.models import TaskStatus
    from curation.selectors import default_probe_model

    probe_model = probe_model or default_probe_model(environment)
    rows = list(_task_costs(environment=environment, probe_model=probe_model).values_list("band", "status", "authoring_usd", "probe_usd"))
    totals = {"tasks": 0, "authoring_usd": 0.0, "probe_usd": 0.0, "in_band_tasks": 0, "in_band_usd": 0.0, "waste_usd": 0.0, "waste_tasks": 0}
    for band, status, authoring, probing in rows:
        spend = float(authoring) + float(probing)
        totals["tasks"] += 1
        totals["authoring_usd"] += float(authoring)
        totals["probe_usd"] += float(probing)
        if status == TaskStatus.RETIRED or band in ("too_hard", "retire"):
            totals["waste_usd"] += spend
            totals["waste_tasks"] += 1
        elif band == "in_band" and status != TaskStatus.REJECTED:
            totals["in_band_usd"] += spend
            totals["in_band_tasks"] += 1
    totals["total_usd"] = totals["authoring_usd"] + totals["probe_usd"]
    totals["cost_per_in_band_task_usd"] = totals["total_usd"] / totals["in_band_tasks"] if totals["in_band_tasks"] else None
    totals["probe_model"] = probe_model.name if probe_model else None
    return totals


def task_cost(*, task) -> dict:
    """One task's spend: authoring (all versions) and probe compute (all rollouts, all models)."""
    row = _task_costs(environment=task.environment, probe_model=None).filter(pk=task.pk).values("authoring_usd", "probe_usd").get()
    return {
        "authoring_usd": float(row["authoring_usd"]),
        "probe_usd": float(row["probe_usd"]),
        "total_usd": float(row["authoring_usd"] + row["probe_usd"]),
    }


def feedback_history(*, task_version) -> list[dict]:
    """Trainer feedback on one task version per checkpoint (reports with one step summed), oldest first."""
    from calibration.models import FeedbackReport

    rows = (
        FeedbackReport.objects.filter(task_version=task_version)
        .values("checkpoint_step")
        .annotate(checkpoint=Max("checkpoint"), attempts=Sum("attempts"), passes=Sum("passes"), reports=Count("id"))
        .order_by("checkpoint_step")
    )
    return [{**row, "pass_rate": row["passes"] / row["attempts"]} for row in rows]
