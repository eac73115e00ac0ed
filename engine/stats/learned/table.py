"""The stopping table an environment learns from its own probes, or the calibrated rule's when learning is unsafe.

In: a fitted ``Population`` (with resamples and, for the harm check, the evidence), thresholds
and a sampling policy. Out: a ``LearnedTable`` (the table, whether it was learned, its predicted
performance against the rule's, the reason). The method and its figures: docs/prediction.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.stats.bands import Thresholds
from engine.stats.learned.performance import (
    Performance,
    _harm,
    _outside_zones,
    _slice_masks,
    _wrong_curve,
    table_performance,
    worst_performance,
)
from engine.stats.learned.population import (
    PLAUSIBLE_NATS,
    Population,
    fit_population,
    plausible_region,
    population_resamples,
)
from engine.stats.learned.search import (
    GUARD_EDGE_ERRORS,
    PriceSearch,
    _overshoot,
    guarded_table,
    priced_table,
    search_prices,
)
from engine.stats.sequential import SamplingPolicy
from engine.stats.tables import StoppingTable, stopping_table

__all__ = [
    "LearnedTable",
    "MIN_TASKS",
    "follows_cheaper",
    "learned_table",
    "learned_table_from_evidence",
]

# Below this many tasks with evidence an environment keeps the calibrated rule.
MIN_TASKS = 1000


@dataclass(frozen=True)
class LearnedTable:
    """The table an environment probes with, and why.

    ``learned``: False when the calibrated rule's table is kept (too few tasks, or no learned table
    meets the targets under the fitted population). ``predicted``: its performance under the
    fitted population (the mixture's, with ``cheaper``); ``default_predicted``: the calibrated
    rule's, for comparison. ``cheaper``: a cheaper guarded table that a share ``cheaper_share`` of
    tasks follows instead of ``table`` (``search_prices``: a randomised policy reaches the
    Lagrangian optimum between two steps of the staircase of tables); which tasks is fixed by a
    hash of the task's key (``table_for``), so a task keeps its table from round to round.
    ``table`` alone meets the targets; the mixture meets them too.
    """

    table: StoppingTable
    learned: bool
    population: Population
    predicted: Performance
    default_predicted: Performance
    reason: str
    cheaper: StoppingTable | None = None
    cheaper_share: float = 0.0

    def table_for(self, key: int) -> StoppingTable:
        """The table the task with integer ``key`` (its id) follows: ``cheaper`` for a share
        ``cheaper_share`` of keys, spread evenly by a multiplicative hash, else ``table``."""
        return self.cheaper if self.cheaper is not None and follows_cheaper(key, self.cheaper_share) else self.table


def follows_cheaper(key: int, share: float) -> bool:
    """Whether the task with integer ``key`` is in the ``share`` of tasks that follow a mixture's
    cheaper table: Knuth's multiplicative hash of the key, as a fraction of 2^32, below ``share``.
    Deterministic, and independent of the task's pass rate."""
    return ((int(key) * 2654435761) % 2**32) / 2**32 < share


def learned_table(
    *,
    population: Population,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    error_target: float = 0.009,
    slice_target: float = 0.045,
    guard_edge_errors: tuple[float, float, float, float] = GUARD_EDGE_ERRORS,
    iterations: int = 20,
    min_tasks: int = MIN_TASKS,
    resamples: Sequence[Population] = (),
    mixture: bool = False,
    evidence: Sequence[tuple[int, int]] | None = None,
    plausible_nats: float = PLAUSIBLE_NATS,
) -> LearnedTable:
    """The cheapest guarded table meeting the error targets under ``population``, or the default's.

    ``error_target`` (outside the zones) and ``slice_target`` (each of ``error_slices``) are the
    limits the fit and each of ``resamples`` are held to (``search_prices`` over
    ``priced_table``, each table guarded by ``guarded_table`` at ``guard_edge_errors``). The
    feasible table with the fewest predicted rollouts is returned if it beats the calibrated rule
    (or the rule itself breaks a target); with no feasible table, the closest miss if it misses
    by less than the rule does; else the rule's table, ``learned=False``, with the reason.
    ``mixture``: allow a mixture of two tables (``cheaper``, ``cheaper_share``); off by default.
    ``evidence``: the (passes, attempts) the population was fitted on; given it, a learned table
    is kept only if it harms no population within ``plausible_nats`` of the best fit. Under
    ``min_tasks`` tasks, or for a policy other than the adaptive calibrated rule, the rule's
    table. Why each step, and the figures behind the defaults: docs/prediction.md.
    """
    fits = [population, *resamples]

    def runs(table: StoppingTable) -> list[Performance]:
        return [table_performance(table=table, population=fit, thresholds=thresholds) for fit in fits]

    default = stopping_table(thresholds=thresholds, policy=policy)
    default_predicted = worst_performance(runs(default))

    def keep_default(reason: str) -> LearnedTable:
        return LearnedTable(default, False, population, default_predicted, default_predicted, reason)

    if policy.kind != "adaptive" or policy.rule != "calibrated":
        return keep_default("only the adaptive calibrated rule is learned")
    if population.tasks < min_tasks:
        return keep_default(f"{population.tasks} tasks with evidence, fewer than {min_tasks}")
    search = search_prices(
        table_at=_guarded_table_at(
            population=population, thresholds=thresholds, policy=policy, guard_edge_errors=guard_edge_errors
        ),
        runs=runs,
        live=_live_slices(population, thresholds),
        error_target=error_target,
        slice_target=slice_target,
        iterations=iterations,
    )
    chosen = _choose(
        search=search,
        population=population,
        default_predicted=default_predicted,
        error_target=error_target,
        slice_target=slice_target,
        mixture=mixture,
    )
    if isinstance(chosen, str):
        return keep_default(chosen)
    if evidence is None:
        return chosen
    harm = _evidence_harm(
        learned=chosen, default=default, evidence=evidence, thresholds=thresholds, plausible_nats=plausible_nats
    )
    return chosen if harm is None else keep_default(harm)


def _live_slices(population: Population, thresholds: Thresholds) -> list[int]:
    """The indices of ``error_slices`` that hold mass (outside the zones) under ``population``."""
    rates, weights = np.asarray(population.pass_rates), np.asarray(population.weights)
    outside = _outside_zones(rates, thresholds)
    masks = [mask & outside for mask in _slice_masks(rates, thresholds)]
    return [index for index, mask in enumerate(masks) if weights[mask].sum() > 1e-9]


def _guarded_table_at(
    *,
    population: Population,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    guard_edge_errors: tuple[float, float, float, float],
) -> Callable[[float, dict[int, float]], StoppingTable]:
    """``table_at(error_price, slice_prices)`` for ``search_prices``: the guarded Bayes-optimal table
    for ``population`` at those prices."""
    rates, weights = np.asarray(population.pass_rates), np.asarray(population.weights)
    outside = _outside_zones(rates, thresholds)
    masks = [mask & outside for mask in _slice_masks(rates, thresholds)]

    def table_at(error_price: float, slice_prices: dict[int, float]) -> StoppingTable:
        optimal = priced_table(
            thresholds=thresholds,
            policy=policy,
            pass_rates=rates,
            weights=weights,
            error_price=error_price,
            slice_prices={index: (masks[index], price) for index, price in slice_prices.items()},
            outside=outside,
        )
        return guarded_table(table=optimal, thresholds=thresholds, policy=policy, edge_errors=guard_edge_errors)

    return table_at


def _choose(
    *,
    search: PriceSearch,
    population: Population,
    default_predicted: Performance,
    error_target: float,
    slice_target: float,
    mixture: bool,
) -> LearnedTable | str:
    """The learned table the search's result earns against the calibrated rule's
    ``default_predicted``, or the reason the rule is kept."""
    best, closest = search.best, search.closest

    def overshoot(performance: Performance) -> float:
        return _overshoot(performance, error_target, slice_target)

    default_feasible = default_predicted.error <= error_target and default_predicted.worst_slice <= slice_target
    if best is None:
        # Nothing meets the targets: the table that misses them least, if it misses by less than
        # the calibrated rule does (a population piled against a zone edge), else the rule.
        if closest is not None and not default_feasible and overshoot(closest[1]) < overshoot(default_predicted):
            return LearnedTable(closest[0], True, population, closest[1], default_predicted, "closest to the targets")
        return "no table meets the targets under the fitted population"
    if mixture and search.mixture is not None:
        cheaper, cheaper_share, mixed = search.mixture
        if not default_feasible or mixed.rollouts < default_predicted.rollouts:
            return LearnedTable(
                best[0], True, population, mixed, default_predicted, "learned (mixture)", cheaper, cheaper_share
            )
    if default_feasible and best[1].rollouts >= default_predicted.rollouts:
        return "the calibrated rule is as cheap under the fitted population"
    return LearnedTable(best[0], True, population, best[1], default_predicted, "learned")


def _evidence_harm(
    *,
    learned: LearnedTable,
    default: StoppingTable,
    evidence: Sequence[tuple[int, int]],
    thresholds: Thresholds,
    plausible_nats: float,
) -> str | None:
    """Why ``learned`` (its table, or a mixture's cheaper one) must not be used: it is wrong outside
    the zones more often than max(1%, the rule) on a population within ``plausible_nats`` of the
    best fit to ``evidence``; None when it harms none."""
    region = plausible_region(evidence=evidence, thresholds=thresholds, nats=plausible_nats)
    if region is None:
        return None
    default_wrong = _wrong_curve(default, region.rates, thresholds)
    for table in [learned.table] + ([learned.cheaper] if learned.cheaper is not None else []):
        harm = _harm(
            regions=[region], tables=[table], default_wrongs=[default_wrong], shares=[1.0], thresholds=thresholds
        )
        if harm is not None:
            return (
                f"the learned table could be {harm[0]:.2%} wrong outside the zones on a population the evidence "
                f"allows (within {plausible_nats:g} nats of the best fit), where the rule's bound is {harm[1]:.2%}"
            )
    return None


def learned_table_from_evidence(
    *,
    evidence: Sequence[tuple[int, int]],
    thresholds: Thresholds,
    policy: SamplingPolicy,
    seed: int = 0,
    min_tasks: int = MIN_TASKS,
    mixture: bool = False,
    checked: bool = True,
    **targets: Any,
) -> LearnedTable:
    """What an environment learns from its (passes, attempts): the fit (``fit_population``), four
    bootstrap resamples seeded with ``seed``, and ``learned_table`` given the evidence (``checked``)
    so that the table is used only if it harms no population the evidence allows. The service,
    the benchmark and the tests all learn through this. ``targets``: ``learned_table``'s."""
    return learned_table(
        population=fit_population(evidence=evidence, thresholds=thresholds),
        resamples=population_resamples(evidence=evidence, thresholds=thresholds, seed=seed),
        thresholds=thresholds,
        policy=policy,
        min_tasks=min_tasks,
        mixture=mixture,
        evidence=evidence if checked else None,
        **targets,
    )
