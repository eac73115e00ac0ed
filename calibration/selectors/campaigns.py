"""Campaigns and their rollouts: progress, bands reached, trajectories and trainer feedback."""

from __future__ import annotations

from django.db.models import (
    Count,
    Max,
    Q,
    QuerySet,
    Sum,
)

from calibration.models import (
    Calibration,
    Campaign,
    CampaignItem,
    FeedbackReport,
    Outcome,
    ProbeModel,
    Rollout,
)
from curation.models import TaskVersion


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


def feedback_history(*, task_version) -> list[dict]:
    """Trainer feedback on one task version per checkpoint (reports with one step summed), oldest first."""
    rows = (
        FeedbackReport.objects.filter(task_version=task_version)
        .values("checkpoint_step")
        .annotate(checkpoint=Max("checkpoint"), attempts=Sum("attempts"), passes=Sum("passes"), reports=Count("id"))
        .order_by("checkpoint_step")
    )
    return [{**row, "pass_rate": row["passes"] / row["attempts"]} for row in rows]


def outcome_counts(*, rollouts: QuerySet[Rollout]) -> list[dict]:
    """How many of `rollouts` ended in each outcome (null: not verified yet), by outcome."""
    return list(rollouts.order_by().values("outcome").annotate(count=Count("id")).order_by("outcome"))


def task_version_rollouts(*, task_version: TaskVersion | None, outcome: str = "", limit: int = 200) -> list[Rollout]:
    """A version's rollouts for its page, by model, campaign and sample; at most `limit`."""
    rollouts = Rollout.objects.filter(task_version=task_version).select_related("probe_model")
    if outcome:
        rollouts = rollouts.filter(outcome=outcome)
    return list(rollouts.order_by("probe_model__name", "campaign_id", "sample_index")[:limit])
