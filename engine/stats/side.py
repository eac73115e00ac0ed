"""Side information about a task before it is probed: an item-response model, and tables per stratum.

Passband often knows something about a task's pass rate under a model before probing it: the
same task's results under another probe model or an earlier checkpoint, its nearest calibrated
neighbours in the embedding index, the author's declared difficulty. Each gives a *score* per
task (higher: expected easier). Two pieces turn scores into fewer rollouts, safely:

* ``fit_item_response``: a Rasch model fitted across models and checkpoints, logit p(task i,
  model j) = ability_j - difficulty_i, by penalised maximum likelihood on pass counts. Its
  prediction ``ability_j - difficulty_i`` for a model that has not probed task i is the score.
* ``stratified_tables``: tasks are cut into strata by score (quantiles of the calibrated tasks'
  scores); each stratum's population is fitted on its own tasks' evidence (``fit_population``
  and bootstrap resamples), and one Lagrangian search, with prices shared by every stratum, finds
  one guarded table per stratum such that the environment as a whole stays within the limits
  under the worst of each stratum's fits. A good score makes strata narrow, and a narrow stratum
  far from a zone's edge is cheap to band, which pays for more rollouts where tasks sit near an
  edge; a useless or adversarial score makes every stratum a random sample of the environment,
  which learns the environment's population again. The score is never believed, only the
  evidence of the tasks that share its stratum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # scipy.stats loads on first use: it costs most of a process's start
from scipy import optimize, special

from engine.stats.bands import Thresholds
from engine.stats.learned import (
    GUARD_EDGE_ERRORS,
    MIN_TASKS,
    LearnedTable,
    Performance,
    Population,
    fit_population,
    guarded_table,
    mixed_performance,
    plausible_region,
    population_resamples,
    priced_table,
    search_prices,
    table_performance,
    worst_performance,
)
from engine.stats.learned.performance import _harm, _outside_zones, _slice_masks, _wrong_curve
from engine.stats.sequential import SamplingPolicy
from engine.stats.tables import StoppingTable, stopping_table

__all__ = [
    "CheckpointBand",
    "ItemResponse",
    "StratifiedTables",
    "checkpoint_bands",
    "fit_item_response",
    "stratified_tables",
]


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
class CheckpointBand:
    """A task's band predicted for a new checkpoint by the item-response model, and how sure it is.

    ``band_probability``: the model's probability of ``band`` (normal on the logit scale, with the
    difficulty's and the ability's standard errors); ``uncertain``: below the level asked for, so
    the task should be probed under the new checkpoint rather than given this band.
    """

    task: int
    predicted_logit: float
    band: str
    band_probability: float
    uncertain: bool


def checkpoint_bands(
    *,
    response: ItemResponse,
    counts: Sequence[tuple[int, int, int, int]],
    ability: float,
    ability_sd: float,
    thresholds: Thresholds,
    level: float = 0.95,
    penalty: float = 0.1,
    misfit_sd: float = 0.0,
) -> list[CheckpointBand]:
    """Which tasks a new checkpoint must re-probe: those whose band the item-response model leaves uncertain.

    ``ability``/``ability_sd``: the new checkpoint's ability and its uncertainty (fitted on a
    sample of tasks it probed, or extrapolated from earlier checkpoints). A task's difficulty
    has the standard error of its Fisher information under ``response`` (plus the ridge
    ``penalty``); its logit under the new checkpoint is normal, and each band's probability
    follows, widened by ``misfit_sd`` (the spread the new checkpoint's sample shows beyond the
    model's, ``prediction_check``). A task whose most probable band is below ``level`` is ``uncertain``. The promise is
    the model's, not the stopping rule's: it holds as far as the Rasch model fits (docs/prediction.md).
    """
    records = np.asarray(list(counts), dtype=float).reshape(-1, 4)
    tasks = response.difficulty.size
    information = np.full(tasks, penalty)
    if records.size:
        task, model, _, attempts = records.T
        probability = special.expit(response.ability[model.astype(int)] - response.difficulty[task.astype(int)])
        information += np.bincount(task.astype(int), attempts * probability * (1 - probability), tasks)
    sd = np.sqrt(1.0 / information + ability_sd**2 + misfit_sd**2)
    mean = ability - response.difficulty
    low = scipy.stats.norm.cdf((special.logit(thresholds.floor) - mean) / sd)
    high = scipy.stats.norm.sf((special.logit(thresholds.retire_at) - mean) / sd)
    bands = []
    for index in range(tasks):
        probabilities = {"too_hard": low[index], "in_band": 1.0 - low[index] - high[index], "retire": high[index]}
        band = max(probabilities, key=lambda name: probabilities[name])
        bands.append(
            CheckpointBand(
                task=index,
                predicted_logit=float(mean[index]),
                band=band,
                band_probability=float(probabilities[band]),
                uncertain=bool(probabilities[band] < level),
            )
        )
    return bands


@dataclass(frozen=True)
class StratifiedTables:
    """``cuts`` (ascending scores between strata) and one ``LearnedTable`` per stratum."""

    cuts: tuple[float, ...]
    tables: tuple[LearnedTable, ...]

    def stratum(self, score: float) -> int:
        return int(np.searchsorted(np.asarray(self.cuts), score, side="right"))

    def table_for(self, score: float) -> LearnedTable:
        return self.tables[self.stratum(score)]


def _combined(
    per_stratum: Sequence[Performance], strata: Sequence[Population], shares: np.ndarray, thresholds: Thresholds
) -> Performance:
    """The environment's performance from each stratum's (conditional) one, weighted by its masses."""
    rollouts = float(sum(share * run.rollouts for share, run in zip(shares, per_stratum)))
    rates = np.asarray(strata[0].pass_rates)
    outside = _outside_zones(rates, thresholds)
    masks = [mask & outside for mask in _slice_masks(rates, thresholds)]

    def mean(region: np.ndarray, errors: Sequence[float | None]) -> float | None:
        masses = np.array([share * np.asarray(fit.weights)[region].sum() for share, fit in zip(shares, strata)])
        if masses.sum() <= 1e-12:
            return None
        return float(sum(mass * (error or 0.0) for mass, error in zip(masses, errors)) / masses.sum())

    error = mean(outside, [run.error for run in per_stratum]) or 0.0
    slices = tuple(mean(mask, [run.slices[index] for run in per_stratum]) for index, mask in enumerate(masks))
    return Performance(rollouts=rollouts, error=error, slices=slices)


def stratified_tables(
    *,
    evidence: Sequence[tuple[int, int]],
    scores: Sequence[float],
    thresholds: Thresholds,
    policy: SamplingPolicy,
    strata: int = 4,
    min_tasks_per_stratum: int = 250,
    min_tasks: int = MIN_TASKS,
    seed: int = 0,
    error_target: float = 0.009,
    slice_target: float = 0.045,
    guard_edge_errors: tuple[float, float, float, float] = GUARD_EDGE_ERRORS,
    iterations: int = 20,
    mixture: bool = False,
    checked: bool = True,
) -> StratifiedTables:
    """One learned table per stratum of score, each fitted on its own tasks, all held to the limits together.

    ``evidence`` and ``scores`` are per calibrated task (``ValueError`` when their lengths differ);
    strata are quantiles of the scores (fewer when the tasks would not give each
    ``min_tasks_per_stratum``); below ``min_tasks`` tasks every stratum keeps the rule. Each
    stratum's population is fitted on its own tasks (with ``seed``-ed bootstrap resamples); one
    Lagrangian search with prices shared by every stratum holds the environment as a whole to
    ``error_target`` and ``slice_target`` under the worst of each stratum's fits. Every table is
    guarded as in ``learned_table``; ``mixture`` as there. ``checked``: used only if they harm no
    environment the strata's evidence allows. Otherwise, or if no tables meet the limits or the
    rule is as cheap, every stratum keeps the rule. Out: the cuts and one ``LearnedTable`` per stratum.
    """
    pairs = list(evidence)
    values = np.asarray(list(scores), dtype=float)
    if len(values) != len(pairs):
        raise ValueError(f"one score per task: {len(values)} scores for {len(pairs)} tasks")
    cuts = _stratum_cuts(values, strata=strata, min_tasks_per_stratum=min_tasks_per_stratum)
    which = np.searchsorted(np.asarray(cuts), values, side="right")
    fit = _Strata(
        [[pair for pair, index in zip(pairs, which) if index == stratum] for stratum in range(len(cuts) + 1)],
        thresholds=thresholds,
        policy=policy,
        seed=seed,
    )
    default = stopping_table(thresholds=thresholds, policy=policy)
    default_overall = worst_performance(fit.runs([default] * fit.count))
    default_per_stratum = [worst_performance(run) for run in fit.stratum_runs([default] * fit.count)]

    def keep_default(reason: str) -> StratifiedTables:
        return StratifiedTables(
            cuts=cuts,
            tables=tuple(
                LearnedTable(default, False, population, run, run, reason)
                for population, run in zip(fit.populations, default_per_stratum)
            ),
        )

    if len(pairs) < min_tasks or policy.kind != "adaptive" or policy.rule != "calibrated":
        return keep_default(f"{len(pairs)} tasks with evidence, fewer than {min_tasks}")
    search = search_prices(
        table_at=lambda error_price, slice_prices: fit.table_at(error_price, slice_prices, guard_edge_errors),
        runs=fit.runs,
        live=fit.live,
        error_target=error_target,
        slice_target=slice_target,
        iterations=iterations,
    )
    if search.best is None:
        return keep_default("no tables meet the targets under the fitted strata")
    tables, overall = search.best
    cheaper, cheaper_share = None, 0.0
    if mixture and search.mixture is not None:
        cheaper, cheaper_share, overall = search.mixture
    default_feasible = default_overall.error <= error_target and default_overall.worst_slice <= slice_target
    if default_feasible and overall.rollouts >= default_overall.rollouts:
        return keep_default("the calibrated rule is as cheap under the fitted strata")
    candidates = [tables] + ([cheaper] if cheaper is not None else [])
    harm = fit.harm(candidates, default) if checked else None
    if harm is not None:
        return keep_default(harm)
    return StratifiedTables(
        cuts=cuts, tables=fit.learned(tables, cheaper, cheaper_share, default_per_stratum=default_per_stratum)
    )


def _stratum_cuts(values: np.ndarray, *, strata: int, min_tasks_per_stratum: int) -> tuple[float, ...]:
    """Ascending cuts between strata of ``values``: quantiles, as many as leave each stratum at least
    ``min_tasks_per_stratum`` tasks (a stratum left short by ties is merged into a neighbour)."""
    strata = max(1, min(strata, len(values) // max(1, min_tasks_per_stratum)))
    cut_list = sorted(set(np.quantile(values, np.arange(1, strata) / strata).tolist())) if strata > 1 else []
    while cut_list:
        sizes = np.bincount(np.searchsorted(np.asarray(cut_list), values, side="right"), minlength=len(cut_list) + 1)
        smallest = int(np.argmin(sizes))
        if sizes[smallest] >= min_tasks_per_stratum:
            break
        del cut_list[min(smallest, len(cut_list) - 1)]
    return tuple(float(cut) for cut in cut_list)


class _Strata:
    """The strata's evidence, fits (each stratum's population, then its resamples) and shares, and
    what the shared price search needs of them: tables at given prices and their performance."""

    def __init__(
        self, evidence: list[list[tuple[int, int]]], *, thresholds: Thresholds, policy: SamplingPolicy, seed: int
    ) -> None:
        self.evidence, self.thresholds, self.policy = evidence, thresholds, policy
        self.count = len(evidence)
        self.fits: list[list[Population]] = [
            [
                fit_population(evidence=own, thresholds=thresholds),
                *population_resamples(evidence=own, thresholds=thresholds, seed=seed + stratum),
            ]
            for stratum, own in enumerate(evidence)
        ]
        self.populations = [stratum_fits[0] for stratum_fits in self.fits]
        shares = np.array([population.tasks for population in self.populations], dtype=float)
        self.shares = shares / max(shares.sum(), 1.0)
        self.rates = np.asarray(self.populations[0].pass_rates)
        self.masses = sum(
            share * np.asarray(population.weights) for share, population in zip(self.shares, self.populations)
        )
        self.outside = _outside_zones(self.rates, thresholds)
        self.masks = [mask & self.outside for mask in _slice_masks(self.rates, thresholds)]
        self.live = [index for index, mask in enumerate(self.masks) if self.masses[mask].sum() > 1e-9]

    def stratum_runs(self, tables: Sequence[StoppingTable]) -> list[list[Performance]]:
        """runs[k][r]: stratum k's table under its fit r (0: on all its tasks, then the resamples)."""
        return [
            [table_performance(table=table, population=fit, thresholds=self.thresholds) for fit in stratum_fits]
            for table, stratum_fits in zip(tables, self.fits)
        ]

    def runs(self, tables: Sequence[StoppingTable]) -> list[Performance]:
        """The environment under resample r is every stratum's resample r."""
        per_stratum = self.stratum_runs(tables)
        return [
            _combined(
                [run[r] for run in per_stratum],
                [stratum_fits[r] for stratum_fits in self.fits],
                self.shares,
                self.thresholds,
            )
            for r in range(len(self.fits[0]))
        ]

    def table_at(
        self, error_price: float, slice_prices: dict[int, float], guard_edge_errors: tuple[float, float, float, float]
    ) -> list[StoppingTable]:
        """One guarded Bayes-optimal table per stratum, every stratum paying the same prices."""
        return [
            guarded_table(
                table=priced_table(
                    thresholds=self.thresholds,
                    policy=self.policy,
                    pass_rates=self.rates,
                    weights=np.asarray(population.weights),
                    error_price=error_price,
                    slice_prices={index: (self.masks[index], price) for index, price in slice_prices.items()},
                    outside=self.outside,
                    masses=self.masses,
                ),
                thresholds=self.thresholds,
                policy=self.policy,
                edge_errors=guard_edge_errors,
            )
            for population in self.populations
        ]

    def harm(self, candidates: Sequence[Sequence[StoppingTable]], default: StoppingTable) -> str | None:
        """Why the candidate sets of tables must not be used (one harms an environment the strata's
        evidence allows), or None; None too when a stratum has no evidence to bound."""
        found = [plausible_region(evidence=own, thresholds=self.thresholds) for own in self.evidence]
        regions = [region for region in found if region is not None]
        if len(regions) != len(found):
            return None
        default_wrongs = [_wrong_curve(default, region.rates, self.thresholds) for region in regions]
        for tables in candidates:
            harm = _harm(
                regions=regions,
                tables=tables,
                default_wrongs=default_wrongs,
                shares=self.shares.tolist(),
                thresholds=self.thresholds,
            )
            if harm is not None:
                return (
                    f"the tables could be {harm[0]:.2%} wrong outside the zones on populations the strata's "
                    f"evidence allows, where the rule's bound is {harm[1]:.2%}"
                )
        return None

    def learned(
        self,
        tables: Sequence[StoppingTable],
        cheaper: Sequence[StoppingTable] | None,
        cheaper_share: float,
        *,
        default_per_stratum: Sequence[Performance],
    ) -> tuple[LearnedTable, ...]:
        """One ``LearnedTable`` per stratum, its predicted performance the mixture's when ``cheaper``."""
        per_stratum = [worst_performance(run) for run in self.stratum_runs(tables)]
        if cheaper is not None:
            cheaper_per_stratum = [worst_performance(run) for run in self.stratum_runs(cheaper)]
            per_stratum = [
                mixed_performance(run, cheap_run, cheaper_share)
                for run, cheap_run in zip(per_stratum, cheaper_per_stratum)
            ]
        return tuple(
            LearnedTable(
                table,
                True,
                population,
                run,
                default_run,
                "learned (mixture)" if cheaper is not None else "learned",
                None if cheaper is None else cheaper[index],
                cheaper_share,
            )
            for index, (table, population, run, default_run) in enumerate(
                zip(tables, self.populations, per_stratum, default_per_stratum)
            )
        )
