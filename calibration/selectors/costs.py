"""What tasks cost, defined once, for the dashboard, the model comparison page and the API.

- Spend of a task: authoring (every version) plus probing (every rollout of every version, under
  every model: money spent is spent, whichever model a page shows bands for). Each sum runs in its
  own subquery, so joins never count a dollar twice, and a new version never hides what earlier
  ones cost.
- Band of a task: its current version's band under the probe model (the latest calibration when
  none is chosen).
- In band: band in_band and neither rejected nor retired. Waste: retired, or band too_hard or retire.
- Probed: the current version has a calibration under the probe model. Cost per in-band task:
  the authoring of the probed tasks plus all probing, divided by the in-band tasks (tasks never
  probed could not have come out in band; calibration/costs.py, where every ratio is defined).
"""

from __future__ import annotations

from django.db.models import (
    Case,
    CharField,
    Count,
    DecimalField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from calibration import costs
from calibration.models import Band, Calibration, ProbeModel, Rollout
from calibration.selectors.tasks import default_probe_model
from curation.models import Environment, Task, TaskStatus, TaskVersion

WASTE_BANDS = (Band.TOO_HARD, Band.RETIRE)
MONEY = DecimalField(max_digits=20, decimal_places=8)


def _zero_if_null(subquery: QuerySet) -> Coalesce:
    return Coalesce(Subquery(subquery, output_field=MONEY), Value(0, output_field=MONEY))


def tasks_with_spend(*, environment: Environment | None, probe_model: ProbeModel | None) -> QuerySet[Task]:
    """Tasks annotated with authoring_usd, probe_usd, band and spend_class (in_band, waste, other)."""
    authoring = (
        TaskVersion.objects.filter(task=OuterRef("pk"))
        .order_by()
        .values("task")
        .annotate(total=Sum("authoring_cost_usd"))
        .values("total")
    )
    rollouts = Rollout.objects.filter(task_version__task=OuterRef("pk"))
    band = Calibration.objects.filter(task_version=OuterRef("current_version"))
    if probe_model is not None:
        band = band.filter(probe_model=probe_model)
    probing = rollouts.order_by().values("task_version__task").annotate(total=Sum("cost_usd")).values("total")
    tasks = Task.objects.all() if environment is None else Task.objects.filter(environment=environment)
    return tasks.annotate(
        authoring_usd=_zero_if_null(authoring),
        probe_usd=_zero_if_null(probing),
        band=Subquery(band.order_by("-updated_at").values("band")[:1]),
    ).annotate(
        spend_class=Case(
            When(Q(status=TaskStatus.RETIRED) | Q(band__in=WASTE_BANDS), then=Value("waste")),
            When(Q(band=Band.IN_BAND) & ~Q(status=TaskStatus.REJECTED), then=Value("in_band")),
            default=Value("other"),
            output_field=CharField(),
        )
    )


def _spend_rows(*, environment: Environment | None, probe_model: ProbeModel | None) -> list[dict]:
    """One GROUP BY (environment, band, spend class): tasks, authoring and probing dollars."""
    rows = (
        tasks_with_spend(environment=environment, probe_model=probe_model)
        .values("environment__name", "band", "spend_class")
        .annotate(tasks=Count("pk"), authoring=Sum("authoring_usd"), probing=Sum("probe_usd"))
        .order_by()
    )
    return [{**row, "authoring": float(row["authoring"] or 0), "probing": float(row["probing"] or 0)} for row in rows]


def _zero_totals() -> dict:
    return {"tasks": 0, "authoring_usd": 0.0, "probe_usd": 0.0, "in_band_tasks": 0, "in_band_usd": 0.0,
            "waste_tasks": 0, "waste_usd": 0.0, "probed_tasks": 0, "probed_authoring_usd": 0.0}  # fmt: skip


def _with_ratios(total: dict) -> dict:
    total["total_usd"] = total["authoring_usd"] + total["probe_usd"]
    total["cost_per_task_usd"] = costs.per_task(total["total_usd"], total["tasks"])
    total["cost_per_in_band_task_usd"] = costs.per_in_band_task(
        probed_authoring_usd=total["probed_authoring_usd"],
        probing_usd=total["probe_usd"],
        in_band_tasks=total["in_band_tasks"],
    )
    return total


def _per_environment(rows: list[dict]) -> dict[str, dict]:
    totals: dict[str, dict] = {}
    for row in rows:
        total = totals.setdefault(row["environment__name"], _zero_totals())
        spend = row["authoring"] + row["probing"]
        total["tasks"] += row["tasks"]
        total["authoring_usd"] += row["authoring"]
        total["probe_usd"] += row["probing"]
        if row["band"] is not None:
            total["probed_tasks"] += row["tasks"]
            total["probed_authoring_usd"] += row["authoring"]
        if row["spend_class"] in ("in_band", "waste"):
            total[row["spend_class"] + "_tasks"] += row["tasks"]
            total[row["spend_class"] + "_usd"] += spend
    return {name: _with_ratios(total) for name, total in totals.items()}


def environment_costs(*, environment: Environment, probe_model: ProbeModel | None = None) -> dict:
    """One environment's spend, in-band tasks, waste and cost per in-band task (dollars as floats).

    Bands are under `probe_model` (default: the model of the environment's latest campaign).
    """
    probe_model = probe_model or default_probe_model(environment)
    totals = _per_environment(_spend_rows(environment=environment, probe_model=probe_model))
    total = totals.get(environment.name) or _with_ratios(_zero_totals())
    return {**total, "probe_model": probe_model.name if probe_model else None}


def cost_summary(*, environment: Environment | None, probe_model: ProbeModel | None) -> dict:
    """Per environment: spend, tasks, in-band tasks and the cost of each; spend by band with waste.

    The dashboard's cost chart; the same definitions as `environment_costs`.
    """
    rows = _spend_rows(environment=environment, probe_model=probe_model)
    bands: dict[tuple[str, str], dict] = {}
    for row in rows:
        band = row["band"] or "unprobed"
        entry = bands.setdefault(
            (row["environment__name"], band),
            {
                "environment": row["environment__name"],
                "band": band,
                "tasks": 0,
                "probing_usd": 0.0,
                "authoring_usd": 0.0,
                "waste_usd": 0.0,
            },
        )
        entry["tasks"] += row["tasks"]
        entry["probing_usd"] += row["probing"]
        entry["authoring_usd"] += row["authoring"]
        if row["spend_class"] == "waste":
            entry["waste_usd"] += row["authoring"] + row["probing"]
    environments = [
        {
            "environment": name,
            "tasks": total["tasks"],
            "in_band": total["in_band_tasks"],
            "probing_usd": total["probe_usd"],
            "authoring_usd": total["authoring_usd"],
            "cost_per_task_usd": total["cost_per_task_usd"],
            "cost_per_in_band_task_usd": total["cost_per_in_band_task_usd"],
            "probed_tasks": total["probed_tasks"],
            "probing_per_task_usd": costs.per_task(total["probe_usd"], total["tasks"]),
        }
        for name, total in sorted(_per_environment(rows).items())
    ]
    return {
        "environments": environments,
        "bands": [bands[key] for key in sorted(bands)],
        "wasted_usd": sum(row["waste_usd"] for row in bands.values()),
        "spent_usd": sum(row["probing_usd"] + row["authoring_usd"] for row in bands.values()),
    }


def task_cost(*, task: Task) -> dict:
    """One task's spend: authoring (all versions) and probe compute (all rollouts, all models)."""
    row = (
        tasks_with_spend(environment=task.environment, probe_model=None)
        .filter(pk=task.pk)
        .values("authoring_usd", "probe_usd")
        .get()
    )
    return {
        "authoring_usd": float(row["authoring_usd"]),
        "probe_usd": float(row["probe_usd"]),
        "total_usd": float(row["authoring_usd"] + row["probe_usd"]),
    }
