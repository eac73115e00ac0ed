"""Side information for the learned policy: what Passband knows of a task before probing it under a
model, as a score per task (higher: expected easier), and one stopping table per stratum of it.

Two sources, each from side information only (never the task's own results under the model):

* ``declared difficulty``: the author's (the task format's ``difficulty``); the score is its negative.
* ``other probe models``: the task's results under the environment's other probe models and
  checkpoints, through the item-response model (``stats.fit_item_response``); the score is minus
  the task's fitted difficulty.

Once ``PASSBAND_LEARNED_MIN_TASKS`` calibrated tasks have a score from a source, the environment
learns one table per stratum of it (``stats.stratified_tables``, held to the do-no-harm check); of
the sources whose strata are kept, the one predicted to spend the fewest rollouts is used. A task
with a score from that source follows its stratum's table; any other task, the table learned
without side information (docs/prediction.md, "Side information").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.db.models import F

from calibration.models import Calibration, ProbeModel
from curation.models import Environment, TaskVersion
from engine import stats

logger = logging.getLogger(__name__)

DECLARED = "declared difficulty"
OTHER_MODELS = "other probe models"


def task_scores(*, environment: Environment, probe_model: ProbeModel) -> dict[str, dict[int, float]]:
    """Per source, each current task version's score (by version id) where the source gives one."""
    declared = dict(
        TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
        .exclude(declared_difficulty=None)
        .values_list("pk", "declared_difficulty")
    )
    return {
        DECLARED: {version: -difficulty for version, difficulty in declared.items()},
        OTHER_MODELS: _other_model_scores(environment=environment, probe_model=probe_model),
    }


def _other_model_scores(*, environment: Environment, probe_model: ProbeModel) -> dict[int, float]:
    """Minus each task's difficulty in a Rasch model fitted on the other probe models' counts alone."""
    records = list(
        Calibration.objects.filter(
            task_version__task__environment=environment,
            task_version__task__current_version=F("task_version"),
            attempts__gt=0,
        )
        .exclude(probe_model=probe_model)
        .values_list("task_version_id", "probe_model_id", "successes", "attempts")
    )
    if not records:
        return {}
    versions = sorted({version for version, _, _, _ in records})
    models = sorted({model for _, model, _, _ in records})
    version_index = {version: index for index, version in enumerate(versions)}
    model_index = {model: index for index, model in enumerate(models)}
    fit = stats.fit_item_response(
        counts=[
            (version_index[version], model_index[model], successes, attempts)
            for version, model, successes, attempts in records
        ],
        tasks=len(versions),
        models=len(models),
    )
    return {version: -float(fit.difficulty[index]) for version, index in version_index.items()}


def strata_entry(
    *,
    rows: Sequence[tuple[int, int, int]],
    scores: dict[str, dict[int, float]],
    thresholds: stats.Thresholds,
    policy: stats.SamplingPolicy,
    seed: int,
    minimum: int,
    name: str,
    baseline: float,
) -> dict | None:
    """The cached outcome of learning tables per stratum of score, from the calibrated tasks' ``rows``
    (version id, successes, attempts): None when no source scores ``minimum`` of them; else
    {"source", "reason"}, with "cuts" (ascending scores between strata), "tables" (one per stratum,
    lowest score first) and "scores" (the source's score of every current version, by id) when some
    source's strata were kept. Strata are kept only if predicted to spend fewer rollouts a task than
    ``baseline`` (what the environment's table without side information, or the rule, is predicted
    to spend). When none was kept, "source" and "reason" are the first source tried."""
    tried: list[tuple[float, dict]] = []
    for source, by_version in scores.items():
        scored = [
            (by_version[version], successes, attempts) for version, successes, attempts in rows if version in by_version
        ]
        if len(scored) < minimum:
            continue
        stratified = stats.stratified_tables(
            evidence=[(successes, attempts) for _, successes, attempts in scored],
            scores=[score for score, _, _ in scored],
            thresholds=thresholds,
            policy=policy,
            seed=seed,
            min_tasks=minimum,
            min_tasks_per_stratum=max(1, minimum // 4),
        )
        reason = stratified.tables[0].reason
        logger.info("tables per stratum of %s for %s: %s", source, name, reason)
        entry: dict = {"source": source, "reason": reason}
        if not all(table.learned for table in stratified.tables):
            tried.append((float("inf"), entry))
            continue
        tasks = sum(table.population.tasks for table in stratified.tables)
        rollouts = sum(table.population.tasks * table.predicted.rollouts for table in stratified.tables) / tasks
        if rollouts >= baseline:
            entry["reason"] = (
                f"the tables per stratum are predicted to spend {rollouts:.1f} rollouts a task, no fewer than "
                f"the {baseline:.1f} without side information"
            )
            tried.append((float("inf"), entry))
            continue
        entry.update(
            cuts=list(stratified.cuts),
            tables=[stats.table_to_lists(table.table) for table in stratified.tables],
            scores=by_version,
        )
        tried.append((rollouts, entry))
    if not tried:
        return None
    return min(tried, key=lambda pair: pair[0])[1]
