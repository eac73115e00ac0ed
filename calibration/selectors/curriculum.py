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
from calibration.services.policies import thresholds_for
from curation.models import Environment, StatusChange, Task, TaskStatus
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
    in_band_history: list[tuple[int, int]]  # (checkpoint step, tasks in band then), the last few
    forecast: stats.PoolForecast


FORECAST_CHECKPOINTS = 5


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

    Each task's pass rate under that checkpoint: trainer feedback for checkpoints before `step` (all
    of it when None; the feedback reported at `step` itself came after its draw), older checkpoints
    discounted by PASSBAND_FEEDBACK_DISCOUNT per checkpoint, with the calibration under `probe_model`
    (if given) as the oldest evidence. A task that feedback retired leaves the pool from the step after
    the feedback that retired it (and comes back the same way), so the same seed and step draw the same
    tasks whatever feedback came later. The forecast fits a line to the in-band count at the last
    FORECAST_CHECKPOINTS reported checkpoints (retired tasks counted by their estimate then, so that
    retiring a task shrinks the pool) and extrapolates it to zero.
    """
    visible = list(
        tasks_visible_to(user)
        .filter(environment=environment, status__in=[*PUBLISHED, TaskStatus.RETIRED], current_version__isnull=False)
        .select_related("environment", "current_version")
    )
    changes = _feedback_changes(visible)
    tasks = [task for task in visible if _in_pool(task, step=step, changes=changes)]
    evidence = _evidence(version_ids=[task.current_version_id for task in visible], probe_model=probe_model, step=step)
    thresholds = thresholds_for(environment)
    candidates = [(task.pk, evidence.posterior(task, None)) for task in tasks]
    drawn, estimates = stats.curriculum_sample(
        candidates=candidates, count=count, seed=seed, thresholds=thresholds, group_size=group_size
    )
    history = _in_band_history(tasks=visible, evidence=evidence, thresholds=thresholds)
    by_id = {task.pk: task for task in tasks}
    pool = {str(band): 0 for band in stats.BANDS}
    for estimate in estimates:
        pool[str(estimate.band)] += 1
    return Curriculum(
        drawn=[
            CurriculumTask(
                task=by_id[choice.item],
                estimate=choice,
                checkpoints=len(evidence.by_step.get(by_id[choice.item].current_version_id, [])),
            )
            for choice in drawn
        ],
        pool=pool,
        candidates=len(estimates),
        in_band_history=history,
        forecast=stats.pool_forecast(history),
    )


@dataclass(frozen=True)
class _Evidence:
    """What the draw knows of each version: `probes`, its (successes, attempts) under the probe model, and
    `by_step`, its trainer feedback as (checkpoint step, passes, attempts) in step order."""

    probes: dict[int, tuple[int, int]]
    by_step: dict[int, list[tuple[int, int, int]]]
    discount: float

    def posterior(self, task: Task, until: int | None) -> stats.Beta:
        """The task's pass rate given the probe and the feedback of checkpoints up to `until` (None: all)."""
        return stats.checkpoint_posterior(
            probe=self.probes.get(task.current_version_id),
            checkpoints=[
                (passes, attempts)
                for step_at, passes, attempts in self.by_step.get(task.current_version_id, [])
                if until is None or step_at <= until
            ],
            discount=self.discount,
        )


def _evidence(*, version_ids: list[int], probe_model: ProbeModel | None, step: int | None) -> _Evidence:
    """The calibrations under `probe_model` (none without one) and the feedback reported before `step`
    (all of it when None) of the versions `version_ids`."""
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
        # The draw for a step comes before that step's own feedback: replaying it ignores what came after.
        reports = reports.filter(checkpoint_step__lt=step)
    by_step: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # version: (step, passes, attempts)
    for row in (
        reports.values("task_version", "checkpoint_step")
        .annotate(passes=Sum("passes"), attempts=Sum("attempts"))
        .order_by("task_version", "checkpoint_step")
    ):
        by_step[row["task_version"]].append((row["checkpoint_step"], row["passes"], row["attempts"]))
    return _Evidence(probes=probes, by_step=by_step, discount=settings.PASSBAND_FEEDBACK_DISCOUNT)


def _in_band_history(*, tasks: list[Task], evidence: _Evidence, thresholds: stats.Thresholds) -> list[tuple[int, int]]:
    """(step, tasks in band by their estimate then) at each of the last FORECAST_CHECKPOINTS reported
    checkpoints, counting the tasks feedback retired since."""
    steps = sorted({step_at for rows in evidence.by_step.values() for step_at, _, _ in rows})[-FORECAST_CHECKPOINTS:]
    return [
        (
            step_at,
            sum(
                stats.band_for_rate(pass_rate=evidence.posterior(task, step_at).mean, thresholds=thresholds)
                == stats.IN_BAND
                for task in tasks
            ),
        )
        for step_at in steps
    ]


def _feedback_changes(tasks: list[Task]) -> dict[int, list[tuple[int, str, str]]]:
    """Per task: (step, from status, to status) of the status changes trainer feedback made, by step."""
    changes: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for task_id, at_step, from_status, to_status in (
        StatusChange.objects.filter(task__in=[task.pk for task in tasks], at_step__isnull=False)
        .order_by("at_step", "changed_at", "id")
        .values_list("task_id", "at_step", "from_status", "to_status")
    ):
        changes[task_id].append((at_step, from_status, to_status))
    return changes


def _in_pool(task: Task, *, step: int | None, changes: dict[int, list[tuple[int, str, str]]]) -> bool:
    """Whether `task` was published when the draw for `step` was made: its status after the feedback
    changes of earlier steps (before any, the status the first one found); today's without `step`."""
    if step is None:
        return task.status in PUBLISHED
    own = changes.get(task.pk, [])
    earlier = [change for change in own if change[0] < step]
    if earlier:
        return earlier[-1][2] in PUBLISHED
    if own:
        return own[0][1] in PUBLISHED
    return task.status in PUBLISHED
