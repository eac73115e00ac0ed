"""Campaigns and their rollouts: progress, bands reached, trajectories and trainer feedback."""

from __future__ import annotations

from django.conf import settings
from django.db.models import (
    Count,
    Max,
    Q,
    QuerySet,
    Sum,
)

from calibration.models import (
    Campaign,
    CampaignItem,
    FeedbackReport,
    Outcome,
    ProbeModel,
    Rollout,
    outcome_count_aggregates,
)
from calibration.selectors.pace import RATE_WINDOW, campaign_pace
from calibration.services.policies import policy_for, sampling_policy, thresholds_for
from curation.models import TaskVersion
from engine import stats

# A campaign's task with no verdict from it yet (or ever: cancelled before its turn).
NOT_PROBED = "not probed"


def campaign_progress(*, campaign: Campaign) -> dict:
    """Items done, rollouts stored and verdicts so far, cost, and the measured rate: one count-and-cost
    query that the campaign page, the trajectory viewer's campaign filter, the CLI and the API all show.

    `rollouts_per_minute` and `eta_seconds` are None ("unknown") until the window holds two bursts of
    stores, `eta_is_bound` when the time left is only an upper bound (pace.campaign_pace); a cancelled
    campaign's unscored rollouts count as `discarded`, at no cost."""
    items = CampaignItem.objects.filter(campaign=campaign).aggregate(
        total=Count("id"), done=Count("id", filter=Q(done=True))
    )
    rollouts = Rollout.objects.filter(campaign=campaign).aggregate(
        stored=Count("id"),
        passed=Count("id", filter=Q(outcome=Outcome.PASS)),
        failed=Count("id", filter=Q(outcome=Outcome.FAIL)),
        verifier_errors=Count("id", filter=Q(outcome__in=[Outcome.ERROR, Outcome.TIMEOUT])),
        tampered=Count("id", filter=Q(outcome=Outcome.TAMPERED)),
        generation_errors=Count("id", filter=Q(outcome=Outcome.GENERATION_ERROR)),
        world_errors=Count("id", filter=Q(outcome=Outcome.WORLD_ERROR)),
        unverified=Count("id", filter=Q(outcome__isnull=True)),
        discarded=Count("id", filter=Q(outcome=Outcome.DISCARDED)),
        truncated=Count("id", filter=Q(truncated=True)),
        prompts_too_long=Count("id", filter=Q(outcome=Outcome.PROMPT_TOO_LONG)),
        text_only=Count("id", filter=Q(capture="text_only")),
        ids_only=Count("id", filter=Q(capture="ids_only")),
        cost=Sum("cost_usd"),
    )
    generated = rollouts["stored"] - rollouts["generation_errors"] - rollouts["prompts_too_long"]
    truncated_share = rollouts["truncated"] / generated if generated else None
    open_items = items["total"] - items["done"]
    cancelled = campaign.status == Campaign.Status.CANCELLED
    pace = campaign_pace(campaign=campaign)
    return {
        "rollouts_per_minute": pace.rollouts_per_minute,
        "rate_window_minutes": int(RATE_WINDOW.total_seconds() // 60),
        "rate_bursts": pace.bursts,
        "eta_seconds": pace.eta_seconds,
        "eta_is_bound": pace.eta_is_bound,
        "items_total": items["total"],
        "items_done": items["done"],
        # A cancelled campaign has nothing left to do: its open items are dropped, not waiting.
        "items_to_do": 0 if cancelled else open_items,
        "items_dropped": open_items if cancelled else 0,
        "percent": round(100 * items["done"] / items["total"]) if items["total"] else 100,
        **rollouts,
        "cost": float(rollouts["cost"] or 0),
        "truncated_share": truncated_share,
        "truncated_percent": None if truncated_share is None else round(100 * truncated_share, 1),
        "truncation_warning": truncated_share is not None and truncated_share > settings.PASSBAND_TRUNCATION_WARN_SHARE,
        "world_failure": _last_world_failure(campaign=campaign) if rollouts["world_errors"] else "",
    }


def _last_world_failure(*, campaign: Campaign) -> str:
    """The detail of the campaign's latest world failure (what failed, and why)."""
    return (
        Rollout.objects.filter(campaign=campaign, outcome=Outcome.WORLD_ERROR)
        .order_by("-pk")
        .values_list("detail", flat=True)
        .first()
        or ""
    )


def truncation_by_model(*, task_version) -> dict[int, dict]:
    """Per probe model: rollouts of one task version that were generated, and how many of them hit
    the completion budget (truncated), with the share; keyed by probe model id."""
    rows = (
        Rollout.objects.filter(task_version=task_version)
        .exclude(outcome=Outcome.GENERATION_ERROR)
        .values("probe_model")
        .annotate(generated=Count("id"), truncated=Count("id", filter=Q(truncated=True)))
        .order_by()
    )
    return {
        row["probe_model"]: {**row, "share": row["truncated"] / row["generated"] if row["generated"] else None}
        for row in rows
    }


def campaign_band_table(*, campaign: Campaign) -> list[tuple[str, int]]:
    """Tasks per band from this campaign's own rollouts, under its own sampling policy.

    Never the stored calibrations: those add up every campaign of the model on a version, so a
    cancelled campaign with no rollouts would show another campaign's bands. The band is the same
    rule a calibration shows (stats.calibration_verdict); tasks with no verdict from this campaign
    are counted as "not probed".
    """
    counts = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(
            **outcome_count_aggregates(),
        )
        .values_list("successes", "failures", "verifier_errors", "generation_errors", "world_errors")
        .order_by()
    )
    thresholds, policy = thresholds_for(campaign.environment), policy_for(campaign)
    bands: dict[tuple[int, int, int, int, int], str] = {}
    tally: dict[str, int] = {}
    for row in counts:
        if row not in bands:
            successes, failures, verifier_errors, generation_errors, world_errors = row
            if successes + failures + verifier_errors + world_errors == 0:
                bands[row] = NOT_PROBED
            else:
                bands[row] = stats.calibration_verdict(
                    successes=successes,
                    attempts=successes + failures,
                    verifier_errors=verifier_errors,
                    generation_errors=generation_errors,
                    world_errors=world_errors,
                    thresholds=thresholds,
                    policy=sampling_policy(policy, attempts=successes + failures),
                    verifier_trouble_share=settings.PASSBAND_VERIFIER_TROUBLE_SHARE,
                ).band.value
        tally[bands[row]] = tally.get(bands[row], 0) + 1
    unprobed = CampaignItem.objects.filter(campaign=campaign).count() - sum(tally.values())
    if unprobed > 0:
        tally[NOT_PROBED] = tally.get(NOT_PROBED, 0) + unprobed
    return sorted(tally.items())


def rollouts_for_viewer(
    *,
    task_versions,
    outcome: str = "",
    search: str = "",
    probe_model: ProbeModel | None = None,
    campaign: Campaign | None = None,
):
    """Rollouts for the trajectory viewer, grouped by task then sample: of the given task versions, or
    with `campaign` every rollout of that campaign (the counts its page shows).

    `outcome` is a verdict or "unverified"; `search` matches the rollout text or the verifier detail.
    """
    if campaign is not None:
        rollouts = Rollout.objects.filter(campaign=campaign)
    else:
        rollouts = Rollout.objects.filter(task_version__in=task_versions)
    rollouts = rollouts.select_related("task_version__task__environment", "probe_model")
    if probe_model is not None:
        rollouts = rollouts.filter(probe_model=probe_model)
    if outcome == "unverified":
        rollouts = rollouts.filter(outcome__isnull=True)
    elif outcome:
        rollouts = rollouts.filter(outcome=outcome)
    if search:
        rollouts = rollouts.filter(Q(text__icontains=search) | Q(detail__icontains=search))
    return rollouts.order_by(
        "task_version__task__key", "task_version_id", "probe_model__name", "campaign_id", "sample_index"
    )


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
    """A version's rollouts for its page, by model, campaign and sample; at most `limit`. The prompt's token
    ids and the logprobs (what a trainer reads, not a page) are left in the database."""
    rollouts = (
        Rollout.objects.filter(task_version=task_version)
        .select_related("probe_model")
        .defer("prompt_token_ids", "logprobs")
    )
    if outcome:
        rollouts = rollouts.filter(outcome=outcome)
    return list(rollouts.order_by("probe_model__name", "campaign_id", "sample_index")[:limit])
