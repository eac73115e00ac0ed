"""Side information about a task before it is probed: an item-response model, and tables per stratum.

Passband often knows something about a task's pass rate under a model before probing it: the
same task's results under another probe model or an earlier checkpoint, its nearest calibrated
neighbours in the embedding index, the author's declared difficulty. Each gives a *score* per
task (higher: expected easier). Two pieces turn scores into fewer rollouts, safely:

* ``fit_item_response``: a Rasch model fitted across models and checkpoints, logit p(task i,
  model j) = ability_j - difficulty_i, by penalised maximum likelihood on pass counts. Its
  prediction ``ability_j - difficulty_i`` for a model that has not probed task i is the score.
* ``stratified_tables``: tasks are cut into strata by score (quantiles of the calibrated tasks'
  scores), and each stratum gets the table learned from its own calibrated tasks
  (``learned.learned_table``, with its guard and bootstrap resamples). A good score makes each
  stratum's population narrow, and a narrow population is cheap to band; a useless or adversarial
  score makes every stratum a random sample of the environment, so each stratum learns the
  environment's population and the tables are the unstratified ones, held to the same targets.
  The safety argument is item by item the one of ``learned``: the score is never believed, only
  the evidence of the tasks that share its stratum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from engine.stats.bands import Thresholds
from engine.stats.learned import GUARD_EDGE_ERRORS, LearnedTable, fit_population, learned_table, population_resamples
from engine.stats.sequential import SamplingPolicy

__all__ = ["ItemResponse", "StratifiedTables", "fit_item_response", "stratified_tables"]


@dataclass(frozen=True)
class ItemResponse:
    """A fitted Rasch model: ``difficulty[i]`` per task, ``ability[j]`` per model or checkpoint."""

    difficulty: np.ndarray
    ability: np.ndarray

    def predicted_logit(self, task: int, model: int) -> float:
        return float(self.ability[model] - self.difficulty[task])


def fit_item_response(
    *, counts: Sequence[tuple[int, int, int, int]], tasks: int, models: int, penalty: float = 0.1
) -> ItemResponse:
    """Fit logit p = ability[model] - difficulty[task] to (task, model, passes, attempts) records.

    ``penalty`` is a ridge on difficulties and abilities (a weak N(0, 1/penalty) prior), so a task
    that never passed gets a finite difficulty. Abilities are centred on the first model (0).
    Raises ``ValueError`` on a record out of range or with passes outside [0, attempts].
    """
    records = np.asarray(list(counts), dtype=float).reshape(-1, 4)
    if records.size:
        task, model, passes, attempts = records.T
        if np.any((task < 0) | (task >= tasks) | (model < 0) | (model >= models)):
            raise ValueError("counts name a task or model out of range")
        if np.any((passes < 0) | (passes > attempts)):
            raise ValueError("counts must have 0 <= passes <= attempts")
    else:
        task = model = passes = attempts = np.zeros(0)
    task_index, model_index = task.astype(int), model.astype(int)

    def objective(parameters: np.ndarray) -> tuple[float, np.ndarray]:
        difficulty, ability = parameters[:tasks], np.concatenate([[0.0], parameters[tasks:]])
        logit = ability[model_index] - difficulty[task_index]
        log_likelihood = passes * -np.logaddexp(0.0, -logit) + (attempts - passes) * -np.logaddexp(0.0, logit)
        residual = passes - attempts * special.expit(logit)  # d log-likelihood / d logit
        gradient_difficulty = np.bincount(task_index, residual, tasks) + penalty * difficulty
        gradient_ability = -np.bincount(model_index, residual, models)[1:] + penalty * ability[1:]
        value = -log_likelihood.sum() + 0.5 * penalty * (difficulty @ difficulty + ability[1:] @ ability[1:])
        return float(value), np.concatenate([gradient_difficulty, gradient_ability])

    result = optimize.minimize(objective, np.zeros(tasks + models - 1), jac=True, method="L-BFGS-B")
    return ItemResponse(difficulty=result.x[:tasks], ability=np.concatenate([[0.0], result.x[tasks:]]))


@dataclass(frozen=True)
class StratifiedTables:
    """``cuts`` (ascending scores between strata) and one ``LearnedTable`` per stratum."""

    cuts: tuple[float, ...]
    tables: tuple[LearnedTable, ...]

    def stratum(self, score: float) -> int:
        return int(np.searchsorted(np.asarray(self.cuts), score, side="right"))

    def table_for(self, score: float) -> LearnedTable:
        return self.tables[self.stratum(score)]


def stratified_tables(
    *,
    evidence: Sequence[tuple[int, int]],
    scores: Sequence[float],
    thresholds: Thresholds,
    policy: SamplingPolicy,
    strata: int = 4,
    min_tasks_per_stratum: int = 500,
    seed: int = 0,
    guard_edge_errors: tuple[float, float, float, float] = GUARD_EDGE_ERRORS,
) -> StratifiedTables:
    """One learned table per stratum of score, each from the (successes, attempts) of its own tasks.

    ``evidence`` and ``scores`` are per calibrated task. Strata are quantiles of the scores; fewer
    strata are used when the tasks would not give each ``min_tasks_per_stratum`` (one stratum:
    ``learned_table`` on the whole environment).
    """
    pairs = list(evidence)
    values = np.asarray(list(scores), dtype=float)
    if len(values) != len(pairs):
        raise ValueError(f"one score per task: {len(values)} scores for {len(pairs)} tasks")
    strata = max(1, min(strata, len(pairs) // max(1, min_tasks_per_stratum)))
    cuts = tuple(float(cut) for cut in np.quantile(values, np.arange(1, strata) / strata)) if strata > 1 else ()
    which = np.searchsorted(np.asarray(cuts), values, side="right")
    tables = []
    for stratum in range(strata):
        own = [pair for pair, index in zip(pairs, which) if index == stratum]
        tables.append(
            learned_table(
                population=fit_population(evidence=own, thresholds=thresholds),
                resamples=population_resamples(evidence=own, thresholds=thresholds, seed=seed + stratum),
                thresholds=thresholds,
                policy=policy,
                min_tasks=min(min_tasks_per_stratum, len(own)) if strata > 1 else min_tasks_per_stratum,
                guard_edge_errors=guard_edge_errors,
            )
        )
    return StratifiedTables(cuts=cuts, tables=tuple(tables))
