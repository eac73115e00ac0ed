"""Band movement across the checkpoints of a training run, and when the in-band pool runs out."""

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
