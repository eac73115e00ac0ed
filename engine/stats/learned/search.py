"""The search for the cheapest guarded table under error limits: guard, priced table, price search.

In: thresholds, a sampling policy, a population's rates and weights, and prices on errors (or a
``table_at(prices)`` and ``runs(table)`` pair for the search). Out: ``StoppingTable``s and a
``PriceSearch`` (the cheapest feasible table, an optional cheaper mixture, the closest miss).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.stats.bands import BORDERLINE, CONTINUE, LABELS, Thresholds
from engine.stats.learned.performance import Performance, mixed_performance, worst_performance
from engine.stats.optimal import bayes_optimal_table
from engine.stats.posterior import JEFFREYS_PRIOR
from engine.stats.sequential import SamplingPolicy, _band_scores, _calibrate, _claims
from engine.stats.tables import StoppingTable

__all__ = [
    "GUARD_EDGE_ERRORS",
    "PriceSearch",
    "guarded_table",
    "priced_table",
    "search_prices",
]

# The guard's error at each zone edge (ClaimLevels order: a task at the floor zone's top called
# too_hard; just under its bottom called in_band; at the retire zone's top called in_band; just
# under its bottom called retire). Against the default's (0.10, 0.10, 0.05, 0.05): twice as loose
# at the floor zone, three times at the retire zone; the learned table itself is held to the
# population targets, the guard only bounds how far a wrong fit can take a single task.
GUARD_EDGE_ERRORS = (0.20, 0.20, 0.15, 0.15)


def guarded_table(
    *,
    table: StoppingTable,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    edge_errors: tuple[float, float, float, float] = GUARD_EDGE_ERRORS,
) -> StoppingTable:
    """``table``, stopping with a band only where the calibrated rule with ``edge_errors`` accepts it.

    The guard is the calibrated rule (``sequential``) with its own error at each zone edge, in
    ``ClaimLevels`` order. Elsewhere the table continues; at the last round, where it cannot, the
    guard's own code is used, so the guard bounds every label the table gives.
    """
    levels = _calibrate(thresholds, int(policy.round_size), int(policy.cap), tuple(edge_errors))
    labels = []
    for index, (attempts, codes) in enumerate(zip(table.attempts, table.labels)):
        successes = np.arange(attempts + 1, dtype=float)
        claims = _claims(successes, attempts, thresholds)
        allowed = np.stack(
            [claims[0] >= levels[0], (claims[1] >= levels[1]) & (claims[2] >= levels[2]), claims[3] >= levels[3]]
        )
        codes = np.asarray(codes).astype(np.int8)
        band_codes = np.clip(codes, 0, 2)
        ok = (codes == CONTINUE) | ((codes <= 2) & allowed[band_codes, np.arange(attempts + 1)])
        if index == len(table.attempts) - 1:
            # The last round cannot continue: a band the guard accepts, the more probable one if two.
            scores = _band_scores(
                JEFFREYS_PRIOR.alpha + successes, JEFFREYS_PRIOR.beta + attempts - successes, thresholds
            )
            fallback = np.where(
                allowed.any(axis=0),
                np.argmax(np.where(allowed, scores, -np.inf), axis=0),
                LABELS.index(BORDERLINE),
            ).astype(np.int8)
            codes = np.where(ok & (codes != CONTINUE), codes, fallback).astype(np.int8)
        else:
            codes = np.where(ok, codes, np.int8(CONTINUE)).astype(np.int8)
        labels.append(codes)
    return StoppingTable(attempts=table.attempts, labels=tuple(labels))


def priced_table(
    *,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    pass_rates: np.ndarray,
    weights: np.ndarray,
    error_price: float,
    slice_prices: dict[int, tuple[np.ndarray, float]],
    outside: np.ndarray,
    masses: np.ndarray | None = None,
) -> StoppingTable:
    """The Bayes-optimal table when a wrong label outside the zones costs ``error_price`` per unit
    of error rate, and one in slice ``mask`` costs ``price`` more (``slice_prices``: index to
    (mask, price)): the Lagrangian of rollouts under error limits, at one set of prices. Error
    rates are relative to ``masses`` (default ``weights``): pass the whole environment's when
    ``weights`` is one stratum of it, so that every stratum pays the same prices."""
    masses = weights if masses is None else masses
    penalty = np.where(outside, error_price / masses[outside].sum(), 0.0)
    for mask, price in slice_prices.values():
        penalty = penalty + np.where(mask, price / masses[mask].sum(), 0.0)
    return bayes_optimal_table(
        thresholds=thresholds,
        policy=policy,
        pass_rates=np.asarray(pass_rates).tolist(),
        weights=np.asarray(weights).tolist(),
        rollout_cost=1.0,
        error_weights=penalty.tolist(),
    )


@dataclass(frozen=True)
class PriceSearch:
    """What ``search_prices`` found. ``best``: (table, predicted performance) of the cheapest single
    table meeting the targets, or None. ``mixture``: (cheaper table, its share of tasks, predicted
    performance of the mixture) when mixing ``best``'s table with a cheaper one that breaks the
    targets still meets them under every fit and costs less; else None. ``closest``: the table
    that misses the targets least, when none meets them."""

    best: tuple[Any, Performance] | None
    mixture: tuple[Any, float, Performance] | None
    closest: tuple[Any, Performance] | None


class _Tables:
    """Every table the search reached, with its performance under each fit and the worst of them,
    and the infeasible table that missed the targets least."""

    def __init__(
        self,
        table_at: Callable[[float, dict[int, float]], Any],
        runs: Callable[[Any], list[Performance]],
        error_target: float,
        slice_target: float,
    ) -> None:
        self.table_at, self.runs = table_at, runs
        self.error_target, self.slice_target = error_target, slice_target
        self.seen: list[tuple[Any, list[Performance], Performance]] = []
        self.closest: tuple[Any, Performance] | None = None

    def feasible(self, performance: Performance) -> bool:
        return performance.error <= self.error_target and performance.worst_slice <= self.slice_target

    def consider(self, error_price: float, slice_prices: dict[int, float]) -> Performance:
        """The worst performance over the fits of the table at these prices, remembered."""
        table = self.table_at(error_price, slice_prices)
        per_fit = self.runs(table)
        performance = worst_performance(per_fit)
        self.seen.append((table, per_fit, performance))
        overshoot = _overshoot(performance, self.error_target, self.slice_target)
        if not self.feasible(performance) and (
            self.closest is None or overshoot < _overshoot(self.closest[1], self.error_target, self.slice_target)
        ):
            self.closest = (table, performance)
        return performance


def search_prices(
    *,
    table_at: Callable[[float, dict[int, float]], Any],
    runs: Callable[[Any], list[Performance]],
    live: Sequence[int],
    error_target: float,
    slice_target: float,
    iterations: int = 20,
    tighten_steps: int = 8,
) -> PriceSearch:
    """The Lagrangian search for the cheapest table under an error target and per-slice targets.

    ``table_at(error_price, slice_prices)`` gives the Bayes-optimal (guarded) table at those
    prices, ``runs`` its performance under each fit (the fitted population and its resamples); a
    table is held to the targets under the worst of them; ``live`` are the slices with mass.
    ``iterations`` subgradient steps on the prices (``_best_dual_prices``), then a bisection of
    ``tighten_steps`` steps on one common scale of the best prices finds the least scale whose
    table meets every target. Over every pair of tables seen (one meeting the targets, one
    cheaper), the cheapest mixture that still meets them is ``mixture`` (``_cheapest_mixture``).
    Why a mixture can beat every single table: docs/prediction.md.
    """
    tables = _Tables(table_at, runs, error_target, slice_target)
    error_price, slice_prices = _best_dual_prices(tables, live, iterations)
    low, high = np.log(0.25), np.log(16.0)
    for _ in range(tighten_steps):
        middle = (low + high) / 2.0
        scale = float(np.exp(middle))
        performance = tables.consider(
            error_price * scale, {index: price * scale for index, price in slice_prices.items()}
        )
        if tables.feasible(performance):
            high = middle
        else:
            low = middle
    feasible_tables = [entry for entry in tables.seen if tables.feasible(entry[2])]
    if not feasible_tables:
        return PriceSearch(best=None, mixture=None, closest=tables.closest)
    best_entry = min(feasible_tables, key=lambda entry: entry[2].rollouts)
    best = (best_entry[0], best_entry[2])
    chosen = _cheapest_mixture(tables, feasible_tables, best[1].rollouts)
    mixture = None
    if chosen is not None:
        safe_table, cheap_table, cheap_share, mixed = chosen
        best = (safe_table, worst_performance(runs(safe_table)))
        mixture = (cheap_table, cheap_share, mixed)
    return PriceSearch(best=best, mixture=mixture, closest=tables.closest)


def _best_dual_prices(tables: _Tables, live: Sequence[int], iterations: int) -> tuple[float, dict[int, float]]:
    """Multiplicative subgradient steps on the error price and the ``live`` slices' prices (raised
    where a target is broken, lowered where it holds); the prices with the highest dual value
    ``rollouts + price * (error - target)`` summed over the targets."""
    error_target, slice_target = tables.error_target, tables.slice_target
    error_price, slice_prices = 2000.0, {index: 200.0 for index in live}
    dual_best = (-np.inf, error_price, dict(slice_prices))
    for step in range(iterations):
        performance = tables.consider(error_price, slice_prices)
        dual = (
            performance.rollouts
            + error_price * (performance.error - error_target)
            + sum(price * ((performance.slices[index] or 0.0) - slice_target) for index, price in slice_prices.items())
        )
        if dual > dual_best[0]:
            dual_best = (dual, error_price, dict(slice_prices))
        rate = 0.6 / (1.0 + step / 6.0)
        error_price *= float(np.exp(rate * np.clip(performance.error / error_target - 1.0, -1.0, 3.0)))
        for index in live:
            slice_error = performance.slices[index] or 0.0
            slice_prices[index] = max(
                1.0, slice_prices[index] * float(np.exp(rate * np.clip(slice_error / slice_target - 1.0, -1.0, 3.0)))
            )
    return dual_best[1], dual_best[2]


def _cheapest_mixture(
    tables: _Tables, feasible_tables: Sequence[tuple[Any, list[Performance], Performance]], best_rollouts: float
) -> tuple[Any, Any, float, Performance] | None:
    """(safe table, cheaper table, the cheaper one's share, the mixture's worst performance) for the
    cheapest mixture of a feasible table with a cheaper one that meets every target under every
    fit and costs less than ``best_rollouts``; None when no mixture does."""
    chosen: tuple[Any, Any, float, Performance] | None = None
    for safe_table, safe_runs, _ in feasible_tables:
        for cheap_table, cheap_runs, cheap in tables.seen:
            if cheap.rollouts >= best_rollouts:
                continue
            share = _least_safe_share(safe_runs, cheap_runs, tables.error_target, tables.slice_target)
            if share is None:
                continue
            mixed = worst_performance(
                [mixed_performance(cheap_run, safe_run, share) for safe_run, cheap_run in zip(safe_runs, cheap_runs)]
            )
            if mixed.rollouts < best_rollouts and (chosen is None or mixed.rollouts < chosen[3].rollouts):
                chosen = (safe_table, cheap_table, 1.0 - share, mixed)
    return chosen


def _overshoot(performance: Performance, error_target: float, slice_target: float) -> float:
    """How far a performance misses its targets: the larger of error / target and worst slice / target."""
    return max(performance.error / error_target, performance.worst_slice / slice_target)


def _least_safe_share(
    safe_runs: Sequence[Performance], cheap_runs: Sequence[Performance], error_target: float, slice_target: float
) -> float | None:
    """The least share of tasks on the safe table (the rest on the cheap one) that keeps every
    target under every fit, or None when only the safe table alone would (share 1)."""
    share = 0.0
    for safe, cheap in zip(safe_runs, cheap_runs):
        pairs = [(safe.error, cheap.error, error_target)]
        pairs += [(a or 0.0, b or 0.0, slice_target) for a, b in zip(safe.slices, cheap.slices)]
        for safe_value, cheap_value, target in pairs:
            if cheap_value <= target:
                continue
            # (1 - q) cheap + q safe <= target  <=>  q >= (cheap - target) / (cheap - safe)
            share = max(share, (cheap_value - target) / max(cheap_value - safe_value, 1e-12))
    share = float(min(1.0, share * (1.0 + 1e-6) + 1e-9))  # rounding must not break a target
    return None if share >= 1.0 else share
