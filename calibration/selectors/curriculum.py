"""The online curriculum: the next tasks for a trainer's checkpoint, by predicted learning signal.

The estimate and the draw are engine.stats.curriculum's; this module gathers the evidence: each
published task's calibration under the probe model, and the trainer feedback reported for
checkpoints up to the one asked about (docs/prediction.md).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Sum

from calibration.models import Calibration, FeedbackReport, ProbeModel
from calibration.services.calibrations import thresholds_for
from curation.models import Environment, Task
from curation.policy import PUBLISHED, tasks_visible_to
from engine import stats


@dataclass(frozen=True)
class CurriculumTask:
    task: Task
    estimate: stats.CurriculumChoice
    checkpoints: int  # checkpoints with feedback up to the one asked about


@dataclass(frozen=True)
class Curriculum:
    drawn: list[CurriculumTask]
    pool: dict[str, int]  # candidates by the band of their estimate
    candidates: int


def curriculum_next(
    *,
    user: AbstractBaseUser,
    environment: Environment,
    count: int,
    seed: int,
    step: int | None = None,
    probe_model: ProbeModel | None = None,
    group_size: int = 8,
) -> Curriculum:
    """Draw `count` of the environment's published tasks `user` may see, for the checkpoint at `step`.

    Each task's pass rate under that checkpoint: trainer feedback for checkpoints at or before
    `step` (all of it when None), older checkpoints discounted by PASSBAND_FEEDBACK_DISCOUNT per
    checkpoint, with the calibration under `probe_model` (if given) as the oldest evidence. A task
    that feedback retired is no longer published, so it leaves the pool.
    """
    tasks = list(
        tasks_visible_to(user)
        .filter(environment=environment, status__in=PUBLISHED, current_version__isnull=False)
        .select_related("environment", "current_version")
    )
    version_ids = [task.current_version_id for task in tasks]
    probes: dict[int, tuple[int, int]] = {}
    if probe_model is not None:
        probes = {
            version: (successes, attempts)
            for version, successes, attempts in Calibration.objects.filter(
                task_version_id__in=version_ids, probe_model=probe_model, attempts__gt=0
            ).values_list("task_version_id", "successes", "attempts")
        }
    reports = FeedbackReport.objects.filter(task_version_id__in=version_ids)
    if step is not None:
        reports = reports.filter(checkpoint_step__lte=step)
    checkpoints: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for row in (
        reports.values("task_version", "checkpoint_step")
        .annotate(passes=Sum("passes"), attempts=Sum("attempts"))
        .order_by("task_version", "checkpoint_step")
    ):
        checkpoints[row["task_version"]].append((row["passes"], row["attempts"]))
    discount = settings.PASSBAND_FEEDBACK_DISCOUNT
    candidates = [
        (
            task.pk,
            stats.checkpoint_posterior(
                probe=probes.get(task.current_version_id),
                checkpoints=checkpoints.get(task.current_version_id, []),
                discount=discount,
            ),
        )
        for task in tasks
    ]
    drawn, estimates = stats.curriculum_sample(
        candidates=candidates, count=count, seed=seed, thresholds=thresholds_for(environment), group_size=group_size
    )
    by_id = {task.pk: task for task in tasks}
    pool = {str(band): 0 for band in stats.BANDS}
    for estimate in estimates:
        pool[str(estimate.band)] += 1
    return Curriculum(
        drawn=[
            CurriculumTask(
                task=by_id[choice.item],
                estimate=choice,
                checkpoints=len(checkpoints.get(by_id[choice.item].current_version_id, [])),
            )
            for choice in drawn
        ],
        pool=pool,
        candidates=len(estimates),
    )
