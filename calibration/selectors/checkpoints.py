"""Band movement across the checkpoints of a training run, when the in-band pool runs out, and the re-profiles
of a checkpoint: where each stands and what its model check said."""

from __future__ import annotations

from django.db.models import Count, F, OuterRef, Q, Subquery

from calibration.models import Band, Calibration, Campaign, ProbeModel, Reprofile
from curation.models import Environment
from engine import stats

BAND_ORDER = [Band.TOO_HARD, Band.IN_BAND, Band.RETIRE, Band.BORDERLINE, Band.UNDECIDED]


def checkpoint_movement(*, environment: Environment, run: str) -> dict | None:
    """Bands of the environment's current task versions under each checkpoint of `run`, how many moved
    from band A to band B between consecutive checkpoints, and the in-band pool's forecast.

    None when the run has no checkpoints. Each checkpoint lists its tasks per band and how many of
    them are predicted (calibration/services/checkpoints.py) rather than probed; each movement
    lists (from, to, tasks) for tasks calibrated under both checkpoints, with the tasks that left
    the band and those that entered it. ``forecast`` fits a line through the in-band counts by
    step (stats.pool_forecast, the curriculum endpoint's rule): tasks per step, and the step where
    it reaches zero (None while the pool is not shrinking).
    """
    checkpoints = list(ProbeModel.objects.filter(run=run).exclude(run="").order_by("checkpoint_step"))
    if not checkpoints:
        return None
    calibrations = Calibration.objects.filter(
        task_version__task__environment=environment,
        task_version__task__current_version=F("task_version"),
        probe_model__in=checkpoints,
    )
    per_band = {
        (row["probe_model"], row["band"]): row
        for row in calibrations.values("probe_model", "band")
        .annotate(tasks=Count("id"), predicted=Count("id", filter=Q(predicted_probability__isnull=False)))
        .order_by()
    }
    rows = []
    for checkpoint in checkpoints:
        bands = {band: per_band.get((checkpoint.pk, band), {}).get("tasks", 0) for band in BAND_ORDER}
        predicted = sum(per_band.get((checkpoint.pk, band), {}).get("predicted", 0) for band in BAND_ORDER)
        rows.append(
            {
                "name": checkpoint.name,
                "step": checkpoint.checkpoint_step,
                "bands": bands,
                "tasks": sum(bands.values()),
                "predicted": predicted,
                "probed": sum(bands.values()) - predicted,
            }
        )
    movements = []
    for before, after in zip(checkpoints, checkpoints[1:]):
        earlier_band = Calibration.objects.filter(task_version=OuterRef("task_version"), probe_model=before).values(
            "band"
        )[:1]
        pairs = (
            calibrations.filter(probe_model=after)
            .annotate(was=Subquery(earlier_band))
            .exclude(was=None)
            .values("was", "band")
            .annotate(tasks=Count("id"))
            .order_by()
        )
        cells = {(row["was"], row["band"]): row["tasks"] for row in pairs}
        movements.append(
            {
                "from": before.name,
                "to": after.name,
                "cells": [
                    {"from": was, "to": band, "tasks": tasks}
                    for (was, band), tasks in sorted(
                        cells.items(), key=lambda item: (BAND_ORDER.index(item[0][0]), BAND_ORDER.index(item[0][1]))
                    )
                ],
                "left_band": sum(tasks for (was, band), tasks in cells.items() if was == Band.IN_BAND != band),
                "entered_band": sum(tasks for (was, band), tasks in cells.items() if band == Band.IN_BAND != was),
            }
        )
    forecast = stats.pool_forecast([(row["step"], row["bands"][Band.IN_BAND]) for row in rows if row["tasks"]])
    return {
        "run": run,
        "band_order": [str(band) for band in BAND_ORDER],
        "checkpoints": rows,
        "movements": movements,
        "forecast": {"slope": forecast.slope, "empty_at_step": forecast.empty_at_step},
    }


def reprofile_in_progress(*, environment: Environment, probe_model: ProbeModel) -> Reprofile | None:
    """The environment's re-profile for `probe_model` that has not finished: its sample campaign running,
    or done with the next step about to run, or its uncertain tasks' campaign running or paused. None
    when there is none; a re-profile whose sample was cancelled, or whose next step failed, is not in
    progress (calling checkpoint_reprofile again samples again, or retries the step)."""
    active = [Campaign.Status.RUNNING, Campaign.Status.PAUSED]
    waiting = Q(stage=Reprofile.Stage.SAMPLE, error="", sample_campaign__status__in=[*active, Campaign.Status.DONE])
    return (
        Reprofile.objects.filter(environment=environment, probe_model=probe_model)
        .filter(waiting | Q(stage=Reprofile.Stage.REPROFILE, reprofile_campaign__status__in=active))
        .select_related("environment", "probe_model", "sample_campaign", "reprofile_campaign", "created_by")
        .first()
    )


def reprofiles_latest(*, environment: Environment, probe_model: ProbeModel, limit: int = 3) -> list[dict]:
    """The environment's latest re-profiles for the checkpoint `probe_model`, newest first, for the dashboard.

    Each: ``reprofile`` (stage, counts, error, release_id), ``campaign`` (that of its current stage: the
    sample's, then the uncertain tasks'; None when there was nothing to probe), ``items`` (``done`` and
    ``total`` of that campaign) and ``check`` (model_check_verdict of its model check; None at the sample)."""
    reprofiles = (
        Reprofile.objects.filter(environment=environment, probe_model=probe_model)
        .select_related("sample_campaign", "reprofile_campaign", "created_by")
        .order_by("-created_at", "-id")[:limit]
    )
    rows = []
    for reprofile in reprofiles:
        campaign = reprofile.campaign
        items = campaign.items.aggregate(total=Count("id"), done=Count("id", filter=Q(done=True))) if campaign else None
        rows.append(
            {
                "reprofile": reprofile,
                "campaign": campaign,
                "items": items,
                "check": model_check_verdict(reprofile.model_check),
            }
        )
    return rows


def model_check_verdict(model_check: dict | None) -> dict | None:
    """The sample's test of the item-response model (Reprofile.model_check, stats.PredictionCheck.as_dict)
    in plain words: ``trusted`` and ``reasons``, the sentences that say why. None when there is no check
    (the re-profile is still at its sample)."""
    if not model_check:
        return None
    checked, worst, limit = model_check.get("checked", 0), model_check.get("worst_z"), model_check.get("critical_z")
    outliers = model_check.get("outliers", 0)
    sum_z2, sum_limit = model_check.get("sum_z2"), model_check.get("critical_sum_z2")
    if model_check.get("trusted"):
        reasons = [
            f"each of the {checked} sampled tasks, predicted without its own results, came out within the limit "
            f"(worst z {worst}, limit {limit}) and together within chance (sum of z² {sum_z2}, limit {sum_limit})"
        ]
        if model_check.get("misfit_sd"):
            reasons.append(
                f"every prediction was widened by {model_check['misfit_sd']} logits for the spread the sample showed"
            )
        return {"trusted": True, "reasons": reasons}
    reasons = []
    if checked < stats.MIN_CHECKED:
        reasons.append(
            f"only {checked} sampled tasks could be checked, too few to test the model (it takes {stats.MIN_CHECKED})"
        )
    if outliers == 1:
        reasons.append(
            f"1 of the {checked} sampled tasks was far from its prediction (made without its own results; "
            f"z {worst}, limit {limit})"
        )
    elif outliers:
        reasons.append(
            f"{outliers} of the {checked} sampled tasks were far from their predictions (made without their own "
            f"results; worst z {worst}, limit {limit})"
        )
    if sum_z2 is not None and sum_limit is not None and sum_z2 > sum_limit:
        reasons.append(
            f"the sample as a whole missed its predictions by more than chance allows (sum of z² {sum_z2}, "
            f"limit {sum_limit})"
        )
    return {"trusted": False, "reasons": reasons or ["the sample did not bear the model out"]}
