"""A stopping table learned from an environment's own probes, guarded so a wrong fit stays safe.

The calibrated rule (``sequential``) makes the same promise per task on every population, so it
spends the same rollouts whatever the environment holds: 72 on each task that never passes. An
environment of a thousand tasks or more carries enough evidence to learn its population, and the
Bayes-optimal table for that population (``optimal``) spends much less. The earlier empirical-Bayes
prior failed because a two-parameter Beta fitted to a spike at 0 plus a shoulder at 4-10% puts
almost no mass at 4-10% and then calls those tasks ``too_hard`` on a few failures. Three things
keep this one safe:

1. **A nonparametric fit** (``fit_population``): the maximum-likelihood mixture of binomials on a
   fixed grid of pass rates (NPMLE, by EM), smoothed on the logit scale and mixed with a little
   uniform mass, so no range of pass rates that the evidence allows is given zero weight. Tasks
   still sampling count too: adaptive stopping depends only on the outcomes seen, so it leaves the
   likelihood unchanged.
2. **Constraints, not a target error alone** (``learned_table``): the table minimises rollouts
   subject to the error outside the zones and the error in every slice of pass rates
   (``error_slices``) staying under targets with a margin, under the fitted population, by the
   same Lagrangian (priced errors, subgradient steps on the prices) as the benchmark's bound B.
3. **A guard**: the learned table may stop with a band only where the calibrated rule at
   ``guard_confidence`` (looser than the default's) would also accept that band. Whatever the
   population, every task's chance of a wrong label is bounded by the guard's operating
   characteristic; a fit that is wrong can spend rollouts, not push a task past the guard.

4. **Every population the evidence allows** (``plausible_region``, ``most_damaging``): a fit is one
   population among many that explain a pilot almost as well. Mass can move a long way within a
   slice of pass rates, towards a zone's edge, for a small loss of likelihood: on a 1,000-task
   pilot of the uniform population, a population 0.1 nat less likely than the best fit gave the
   table learned for the fit 1.29% wrong where the calibrated rule gave 0.96%. Given the
   evidence, a learned table is used only if, on the populations within ``PLAUSIBLE_NATS`` of the
   best fit's log-likelihood that it harms most, it is wrong no more often than max(1%, the
   calibrated rule's error there).

If no table meets the targets under the fitted population (a population piled against a zone's
edge, where no affordable table can), ``learned_table`` returns the calibrated rule's own table:
no worse than without learning. Environments with fewer than ``MIN_TASKS`` tasks with evidence
keep the calibrated rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from engine.stats.bands import BORDERLINE, CONTINUE, LABELS, Thresholds, acceptable_bands
from engine.stats.optimal import bayes_optimal_table
from engine.stats.posterior import JEFFREYS_PRIOR
from engine.stats.sequential import (
    SamplingPolicy,
    _band_scores,
    _calibrate,
    _claims,
    propagate,
)
from engine.stats.tables import StoppingTable, stopping_table

__all__ = [
    "GUARD_EDGE_ERRORS",
    "MIN_TASKS",
    "Performance",
    "LearnedTable",
    "PLAUSIBLE_NATS",
    "PlausibleRegion",
    "Population",
    "error_slices",
    "fit_population",
    "follows_cheaper",
    "guarded_table",
    "learned_table",
    "learned_table_from_evidence",
    "population_resamples",
    "population_support",
    "PriceSearch",
    "mixed_performance",
    "most_damaging",
    "most_damaging_together",
    "plausible_region",
    "priced_table",
    "search_prices",
    "table_performance",
    "worst_performance",
]

# Below this many tasks with evidence an environment keeps the calibrated rule.
MIN_TASKS = 1000
# The guard's error at each zone edge (ClaimLevels order: a task at the floor zone's top called
# too_hard; just under its bottom called in_band; at the retire zone's top called in_band; just
# under its bottom called retire). Against the default's (0.10, 0.10, 0.05, 0.05): twice as loose
# at the floor zone, three times at the retire zone; the learned table itself is held to the
# population targets, the guard only bounds how far a wrong fit can take a single task.
GUARD_EDGE_ERRORS = (0.20, 0.20, 0.15, 0.15)
# How much less likely than the best fit (in nats of the environment's evidence) a population may
# be and still be one the learned table is held under: 2.71 / 2, the one-sided 90% profile-likelihood
# interval of one quantity (chi-square, one degree of freedom), here a table's error rate.
PLAUSIBLE_NATS = 1.35
# The error a release promises outside the zones, where the calibrated rule itself does no worse.
PROMISED_ERROR = 0.01


@dataclass(frozen=True)
class Population:
    """A distribution of true pass rates as point masses: ``pass_rates`` and ``weights`` (sum 1)."""

    pass_rates: tuple[float, ...]
    weights: tuple[float, ...]
    tasks: int

    def mass_between(self, low: float, high: float) -> float:
        rates, weights = np.asarray(self.pass_rates), np.asarray(self.weights)
        return float(weights[(rates >= low) & (rates < high)].sum())


def population_support(thresholds: Thresholds, *, points: int = 96) -> np.ndarray:
    """Grid of pass rates a population is fitted on: 0, dense up to 3x the floor zone, then coarser.

    Contains the zone edges, so the fit and the constraints see them exactly.
    """
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    dense_top = min(0.5, 3.0 * floor_high)
    dense = np.linspace(0.0, dense_top, points // 2 + 1)[1:]
    coarse = np.linspace(dense_top, 1.0, points // 2 + 1)[1:]
    edges = [value for value in (floor_low, floor_high, retire_low, retire_high) if 0.0 < value < 1.0]
    return np.unique(np.round(np.concatenate([[0.0], dense, coarse, edges]), 12))


def _binomial_log_likelihood(successes: np.ndarray, attempts: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """log p^s (1-p)^(n-s), shape (len(successes), len(rates)); 0 * log 0 = 0."""
    failures = attempts - successes
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pass = np.where(successes[:, None] > 0, successes[:, None] * np.log(rates)[None, :], 0.0)
        log_fail = np.where(failures[:, None] > 0, failures[:, None] * np.log1p(-rates)[None, :], 0.0)
    return log_pass + log_fail


def _pair_likelihood(pairs: np.ndarray, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One row per distinct (passes, attempts) pair: its likelihood at each of ``rates``, scaled to a
    maximum of 1 (no underflow at hundreds of attempts; EM and likelihood ratios are unchanged), and
    how many tasks showed it."""
    unique_pairs, multiplicity = np.unique(pairs, axis=0, return_counts=True)
    log_likelihood = _binomial_log_likelihood(unique_pairs[:, 0], unique_pairs[:, 1], rates)
    return np.exp(log_likelihood - log_likelihood.max(axis=1, keepdims=True)), multiplicity.astype(float)


def _maximum_likelihood_weights(likelihood: np.ndarray, multiplicity: np.ndarray, iterations: int) -> np.ndarray:
    """The mixture weights on the grid that maximise the likelihood of the pairs (NPMLE), by EM from
    uniform weights."""
    weights = np.full(likelihood.shape[1], 1.0 / likelihood.shape[1])
    for _ in range(iterations):
        weights = (
            weights * ((multiplicity / np.maximum(likelihood @ weights, 1e-300)) @ likelihood) / multiplicity.sum()
        )
    return weights


def fit_population(
    *,
    evidence: Sequence[tuple[int, int]],
    thresholds: Thresholds,
    iterations: int = 400,
    smoothing: float = 0.25,
    floor_mass: float = 0.02,
    zero_spread: float = 0.1,
) -> Population:
    """The environment's distribution of pass rates from (successes, attempts) per task.

    Nonparametric maximum likelihood on ``population_support`` (EM), then smoothed with a Gaussian
    kernel of ``smoothing`` on the logit scale (of the mass at exactly 0, the share ``zero_spread``
    is spread evenly below the floor zone), and mixed
    with ``floor_mass`` spread evenly over the grid: a fit never rules a range out. Raises
    ``ValueError`` on a pair with successes outside [0, attempts].
    """
    pairs = np.asarray(list(evidence), dtype=float).reshape(-1, 2)
    if pairs.size and (np.any(pairs < 0) or np.any(pairs[:, 0] > pairs[:, 1])):
        raise ValueError("evidence must hold (successes, attempts) pairs with 0 <= successes <= attempts")
    pairs = pairs[pairs[:, 1] > 0]
    rates = population_support(thresholds)
    if len(pairs) == 0:
        uniform = np.full(rates.size, 1.0 / rates.size)
        return Population(tuple(rates.tolist()), tuple(uniform.tolist()), 0)
    likelihood, multiplicity = _pair_likelihood(pairs, rates)
    weights = _maximum_likelihood_weights(likelihood, multiplicity, iterations)
    positive = rates > 0
    logits = special.logit(np.clip(rates[positive], 1e-6, 1 - 1e-6))
    kernel = np.exp(-0.5 * ((logits[:, None] - logits[None, :]) / smoothing) ** 2)
    kernel /= kernel.sum(axis=0, keepdims=True)  # each point's mass spread over its neighbours
    smoothed = weights.copy()
    smoothed[positive] = kernel @ weights[positive]
    # Tasks that never passed cannot tell 0 from a rate just above it: a share of the mass at 0
    # is spread below the floor zone.
    below = positive & (rates < thresholds.floor_zone[0])
    if below.any():
        moved = zero_spread * smoothed[0]
        smoothed[0] -= moved
        smoothed[below] += moved / below.sum()
    smoothed = (1.0 - floor_mass) * smoothed / smoothed.sum() + floor_mass / rates.size
    return Population(tuple(rates.tolist()), tuple(smoothed.tolist()), int(len(pairs)))


@dataclass(frozen=True)
class PlausibleRegion:
    """The populations (weights on ``rates``) whose log-likelihood of the evidence is within
    ``nats`` of the best: ``likelihood`` is one row per distinct (passes, attempts) pair, scaled to
    a maximum of 1, ``multiplicity`` how many tasks showed it, ``best`` the maximum-likelihood
    weights (unsmoothed) and ``best_log_likelihood`` theirs."""

    rates: np.ndarray
    likelihood: np.ndarray
    multiplicity: np.ndarray
    best: np.ndarray
    best_log_likelihood: float
    nats: float

    def log_likelihood(self, weights: np.ndarray) -> float:
        return float(self.multiplicity @ np.log(np.maximum(self.likelihood @ weights, 1e-300)))


def plausible_region(
    *, evidence: Sequence[tuple[int, int]], thresholds: Thresholds, nats: float = PLAUSIBLE_NATS, iterations: int = 2000
) -> PlausibleRegion | None:
    """The populations on ``population_support`` that explain ``evidence`` within ``nats`` of the
    maximum-likelihood one (found by EM, unsmoothed); None without evidence."""
    pairs = np.asarray(list(evidence), dtype=float).reshape(-1, 2)
    pairs = pairs[pairs[:, 1] > 0]
    if len(pairs) == 0:
        return None
    rates = population_support(thresholds)
    likelihood, multiplicity = _pair_likelihood(pairs, rates)
    weights = _maximum_likelihood_weights(likelihood, multiplicity, iterations)
    best = float(multiplicity @ np.log(np.maximum(likelihood @ weights, 1e-300)))
    return PlausibleRegion(rates, likelihood, multiplicity, weights, best, nats)


def most_damaging(
    region: PlausibleRegion, objective: np.ndarray, *, steps: int = 150, bisections: int = 16
) -> np.ndarray:
    """The weights in ``region`` that maximise ``objective @ weights`` (a linear objective on the
    simplex, over a convex set: log-likelihood is concave in the weights).

    For a multiplier lam, the weights maximising log-likelihood + lam * objective are found by
    multiplicative gradient steps (EM with a linear term); lam is bisected to the largest value
    whose maximiser stays within the region's nats, and that maximiser is returned."""
    return most_damaging_together([region], [objective], steps=steps, bisections=bisections)[0]


def most_damaging_together(
    regions: Sequence[PlausibleRegion],
    objectives: Sequence[np.ndarray],
    *,
    steps: int = 150,
    bisections: int = 16,
) -> list[np.ndarray]:
    """``most_damaging`` for several pilots at once (the strata of one environment, each with its own
    evidence): the weights, one population per region, that maximise the sum of ``objectives[k] @
    weights[k]`` while the log-likelihoods together lose at most the first region's nats against their
    best fits. One quantity is bounded (the environment's error), so the loss is shared, not granted to
    each pilot in full. A common multiplier lam prices the objectives; each region's maximiser is
    found on its own (the problem separates), and lam is bisected on the total loss."""
    objectives = [np.asarray(objective, dtype=float) for objective in objectives]
    scale = max(float(np.abs(objective).max()) for objective in objectives)
    allowed = regions[0].nats
    best = [region.best for region in regions]
    if scale <= 0.0:
        return best

    def maximiser(region: PlausibleRegion, objective: np.ndarray, lam: float, start: np.ndarray) -> np.ndarray:
        # Multiplicative steps never revive a weight at 0, and the best fit is sparse: every rate
        # starts with a little weight (a loss of likelihood far under any region's nats).
        total = float(region.multiplicity.sum())
        weights, shift = np.maximum(start, 1e-9), lam * scale
        weights /= weights.sum()
        for _ in range(steps):
            gradient = (region.multiplicity / (region.likelihood @ weights)) @ region.likelihood
            weights = weights * (gradient + lam * objective + shift) / (total + lam * (objective @ weights) + shift)
            weights = np.maximum(weights, 0.0)
            weights /= weights.sum()
        return weights

    def loss(candidate: list[np.ndarray]) -> float:
        return sum(
            region.best_log_likelihood - region.log_likelihood(weights) for region, weights in zip(regions, candidate)
        )

    total = float(sum(region.multiplicity.sum() for region in regions))
    low, high, lam = 0.0, None, total / scale * 0.01
    for _ in range(bisections):
        trial = lam if high is None else (low + high) / 2.0
        candidate = [
            maximiser(region, objective, trial, start) for region, objective, start in zip(regions, objectives, best)
        ]
        if loss(candidate) <= allowed:
            low, best = trial, candidate
            lam = trial * 4.0
        else:
            high = trial
    return best


def population_resamples(
    *, evidence: Sequence[tuple[int, int]], thresholds: Thresholds, count: int = 4, seed: int = 0
) -> list[Population]:
    """``count`` fits of ``fit_population`` on bootstrap resamples of the tasks (seeded): how far
    the fit could be from the truth. ``learned_table`` holds its table to the targets under each."""
    pairs = np.asarray(list(evidence), dtype=float).reshape(-1, 2)
    rng = np.random.default_rng(seed)
    return [
        fit_population(evidence=pairs[rng.integers(0, len(pairs), len(pairs))].tolist(), thresholds=thresholds)
        for _ in range(count if len(pairs) else 0)
    ]


def error_slices(thresholds: Thresholds) -> list[tuple[str, float, float]]:
    """Slices of true pass rate outside the zones, each held to its own error limit.

    At the default thresholds: 0, (0, 1%), [4%, 7%), [7%, 10%), [10%, 20%), [20%, 40%),
    [40%, 60%), [80%, 90%), [90%, 100%] (the benchmark's slices). (low, low) is the single rate 0.
    """
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    cuts = [floor_high, 1.75 * floor_high, 2.5 * floor_high, 5.0 * floor_high, 10.0 * floor_high, retire_low]
    cuts = [cuts[0]] + [cut for cut in cuts[1:-1] if cuts[0] < cut < retire_low] + [retire_low]
    slices = [("0", 0.0, 0.0)]
    if floor_low > 0:
        slices.append((f"(0, {floor_low:g})", 0.0, floor_low))
    slices += [(f"[{low:g}, {high:g})", low, high) for low, high in zip(cuts[:-1], cuts[1:])]
    if retire_high < 1.0:
        middle = (retire_high + 1.0) / 2.0
        slices += [(f"[{retire_high:g}, {middle:g})", retire_high, middle), (f"[{middle:g}, 1]", middle, 1.0 + 1e-12)]
    return slices


def _slice_masks(rates: np.ndarray, thresholds: Thresholds) -> list[np.ndarray]:
    masks = []
    for _, low, high in error_slices(thresholds):
        if low == high:
            masks.append(rates == low)
        else:
            masks.append(((rates > low) if low == 0.0 else (rates >= low)) & (rates < high))
    return masks


def _outside_zones(rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    return ~(((rates >= floor_low) & (rates < floor_high)) | ((rates >= retire_low) & (rates < retire_high)))


def _wrong_matrix(rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """wrong[label, rate]: 1 where that label is not acceptable for that rate (borderline always)."""
    return np.array(
        [
            [label not in acceptable_bands(pass_rate=float(rate), thresholds=thresholds) for rate in rates]
            for label in LABELS
        ],
        dtype=float,
    )


def _wrong_labels(label_mass: np.ndarray, rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """From label probabilities per rate (``propagate``): the probability of a label that is wrong."""
    return (label_mass * _wrong_matrix(rates, thresholds).T).sum(axis=1)


@dataclass(frozen=True)
class Performance:
    """A table's exact behaviour averaged over a population: mean rollouts, error outside the
    zones, and the error in each slice of ``error_slices`` (None where the slice has no mass)."""

    rollouts: float
    error: float
    slices: tuple[float | None, ...]

    @property
    def worst_slice(self) -> float:
        return max((value for value in self.slices if value is not None), default=0.0)


def worst_performance(runs: Sequence[Performance]) -> Performance:
    """The worst of several performances, item by item: most rollouts, most error, each slice's most."""
    slices = tuple(
        None if all(run.slices[index] is None for run in runs) else max(run.slices[index] or 0.0 for run in runs)
        for index in range(len(runs[0].slices))
    )
    return Performance(rollouts=max(run.rollouts for run in runs), error=max(run.error for run in runs), slices=slices)


def table_performance(*, table: StoppingTable, population: Population, thresholds: Thresholds) -> Performance:
    """Exact mean rollouts, error outside the zones and per-slice error of ``table`` on ``population``."""
    rates, weights = np.asarray(population.pass_rates), np.asarray(population.weights)
    label_mass, expected = propagate(schedule=table.attempts, codes=table.labels, pass_rates=rates)
    wrong = _wrong_labels(label_mass, rates, thresholds)
    outside = _outside_zones(rates, thresholds)
    slices = []
    for mask in _slice_masks(rates, thresholds):
        mask = mask & outside
        mass = weights[mask].sum()
        slices.append(float(weights[mask] @ wrong[mask] / mass) if mass > 1e-9 else None)
    outside_mass = weights[outside].sum()
    error = float(weights[outside] @ wrong[outside] / outside_mass) if outside_mass > 0 else 0.0
    return Performance(rollouts=float(weights @ expected), error=error, slices=tuple(slices))


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


def mixed_performance(first: Performance, second: Performance, share: float) -> Performance:
    """The performance when a ``share`` of tasks (drawn independently of their pass rates) follow
    the table behind ``second`` and the rest the one behind ``first``: rollouts, the error and every
    slice's error are averages over tasks, so each is the same mixture of the two."""
    slices = tuple(
        None if a is None and b is None else (1.0 - share) * (a or 0.0) + share * (b or 0.0)
        for a, b in zip(first.slices, second.slices)
    )
    return Performance(
        rollouts=(1.0 - share) * first.rollouts + share * second.rollouts,
        error=(1.0 - share) * first.error + share * second.error,
        slices=slices,
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
    table is held to the targets under the worst of them. First, ``iterations`` multiplicative
    subgradient steps on the prices (raised where a target is broken, lowered where it holds),
    remembering the prices with the highest dual value ``rollouts + price * (error - target)``
    summed over the targets. Then, with those price ratios fixed, a bisection of
    ``tighten_steps`` steps on one common scale finds the least scale whose table meets every
    target.

    A table is a deterministic function of (passes, attempts), so the tables the prices reach are
    a staircase: on the spike population the cheapest one that calls a task that never passed
    ``too_hard`` at 64 rollouts breaks the [4%, 7%) slice (5.2%), and the next one, at 72, keeps
    it with 4 rollouts more on average. Lagrangian duality is tight for *randomised* policies: a
    share of tasks, drawn independently of their pass rates, follows the cheaper table, the rest
    the feasible one; every error rate is then the same mixture of the two tables' rates, linear
    in the share. Over every pair of tables seen (one meeting the targets, one cheaper), the
    least share of the feasible table that meets every target under every fit is found exactly,
    and the cheapest such mixture is ``mixture``. Each table of a mixture is guarded on its own.
    """

    def feasible(performance: Performance) -> bool:
        return performance.error <= error_target and performance.worst_slice <= slice_target

    def overshoot(performance: Performance) -> float:
        return _overshoot(performance, error_target, slice_target)

    seen: list[tuple[Any, list[Performance], Performance]] = []
    closest: tuple[Any, Performance] | None = None

    def consider(error_price: float, slice_prices: dict[int, float]) -> Performance:
        nonlocal closest
        table = table_at(error_price, slice_prices)
        per_fit = runs(table)
        performance = worst_performance(per_fit)
        seen.append((table, per_fit, performance))
        if not feasible(performance) and (closest is None or overshoot(performance) < overshoot(closest[1])):
            closest = (table, performance)
        return performance

    error_price, slice_prices = 2000.0, {index: 200.0 for index in live}
    dual_best = (-np.inf, error_price, dict(slice_prices))
    for step in range(iterations):
        performance = consider(error_price, slice_prices)
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
    _, error_price, slice_prices = dual_best
    low, high = np.log(0.25), np.log(16.0)
    for _ in range(tighten_steps):
        middle = (low + high) / 2.0
        scale = float(np.exp(middle))
        performance = consider(error_price * scale, {index: price * scale for index, price in slice_prices.items()})
        if feasible(performance):
            high = middle
        else:
            low = middle
    feasible_tables = [entry for entry in seen if feasible(entry[2])]
    if not feasible_tables:
        return PriceSearch(best=None, mixture=None, closest=closest)
    best_entry = min(feasible_tables, key=lambda entry: entry[2].rollouts)
    best = (best_entry[0], best_entry[2])
    chosen: tuple[Any, Any, float, Performance] | None = None  # safe table, cheaper table, its share, mixture
    for safe_table, safe_runs, _ in feasible_tables:
        for cheap_table, cheap_runs, cheap in seen:
            if cheap.rollouts >= best[1].rollouts:
                continue
            share = _least_safe_share(safe_runs, cheap_runs, error_target, slice_target)
            if share is None:
                continue
            mixed = worst_performance(
                [mixed_performance(cheap_run, safe_run, share) for safe_run, cheap_run in zip(safe_runs, cheap_runs)]
            )
            if mixed.rollouts < best[1].rollouts and (chosen is None or mixed.rollouts < chosen[3].rollouts):
                chosen = (safe_table, cheap_table, 1.0 - share, mixed)
    mixture = None
    if chosen is not None:
        safe_table, cheap_table, cheap_share, mixed = chosen
        best = (safe_table, worst_performance(runs(safe_table)))
        mixture = (cheap_table, cheap_share, mixed)
    return PriceSearch(best=best, mixture=mixture, closest=closest)


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


def _wrong_curve(table: StoppingTable, rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """P(a label that is not acceptable) at each of ``rates`` under ``table``, exactly."""
    label_mass, _ = propagate(schedule=table.attempts, codes=table.labels, pass_rates=rates)
    return _wrong_labels(label_mass, rates, thresholds)


def _harm(
    *,
    regions: Sequence[PlausibleRegion],
    tables: Sequence[StoppingTable],
    default_wrongs: Sequence[np.ndarray],
    shares: Sequence[float],
    thresholds: Thresholds,
) -> tuple[float, float] | None:
    """(error, bound) on populations the evidence allows where the environment is wrong outside the
    zones more often than the bound, max(PROMISED_ERROR, the calibrated rule's error there), or None.
    The environment is one pilot or several strata (a ``share`` of its tasks each, with its own
    ``region``, ``table`` and the rule's wrong curve on its rates). Two are tried
    (``most_damaging_together``): the populations where it is wrong most, and where it is wrong
    most beyond the rule."""
    wrongs = [_wrong_curve(table, region.rates, thresholds) for region, table in zip(regions, tables)]
    outsides = [_outside_zones(region.rates, thresholds).astype(float) for region in regions]
    for beyond_rule in (False, True):
        objectives = [
            share * outside * (wrong - (default_wrong if beyond_rule else PROMISED_ERROR))
            for share, outside, wrong, default_wrong in zip(shares, outsides, wrongs, default_wrongs)
        ]
        populations = most_damaging_together(regions, objectives)
        mass = sum(share * float(weights @ outside) for share, weights, outside in zip(shares, populations, outsides))
        if mass <= 0.0:
            continue

        def average(curves: Sequence[np.ndarray], populations: list[np.ndarray] = populations) -> float:
            """``curves`` summed outside the zones over these populations, each weighted by its share."""
            return sum(
                share * float(weights @ (outside * curve))
                for share, weights, outside, curve in zip(shares, populations, outsides, curves)
            )

        error = average(wrongs) / mass
        bound = max(PROMISED_ERROR, average(default_wrongs) / mass)
        if error > bound * (1.0 + 1e-6):
            return error, bound
    return None


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

    ``error_target`` and ``slice_target`` are the limits the fitted population is held to (set
    under the 1% and 5% a release promises, a margin for the fit's own error). The search prices
    the error outside the zones and each slice's error, finds the Bayes-optimal table at those
    prices (``bayes_optimal_table(error_weights=...)``), guards it (``guarded_table``) and raises
    a price where its limit is broken, lowers it where it holds; the feasible table with the fewest
    predicted rollouts wins, and only if it beats the calibrated rule's predicted rollouts (or the
    calibrated rule itself breaks a target under the population). With ``resamples``
    (``population_resamples``) every performance is the worst over the fit and its resamples, so a
    table is kept only if it meets the targets under each of them.

    ``mixture``: allow a mixture of two tables (``search_prices``; ``cheaper`` and
    ``cheaper_share`` on the result). Off by default: a mixture sits on the targets exactly, so the
    fit's own error near a zone's edge is no longer absorbed by the slack a single table leaves,
    and on the spike population a 1,000-task pilot then put 5.7-5.8% wrong in the (0, 1%) slice
    on one seed in six (docs/benchmarks-calibration.md, "Learned tables").

    ``evidence``: the (passes, attempts) the population was fitted on. Given it, a learned table is
    used only if it does no harm on any population the evidence allows (``plausible_region`` with
    ``plausible_nats``): the populations in the region that it harms most (``most_damaging``: most
    wrong outside the zones, and most wrong beyond the calibrated rule) are found, and where it is
    wrong more often than max(1%, the rule's error there) the rule is kept. Holding the search
    itself to those populations (adding each as a fit, round by round) was tried: its tables cost
    more rollouts than the rule on the uniform and mostly-easy populations.
    """
    fits = [population, *resamples]

    def runs(table: StoppingTable) -> list[Performance]:
        return [table_performance(table=table, population=fit, thresholds=thresholds) for fit in fits]

    def predicted(table: StoppingTable) -> Performance:
        return worst_performance(runs(table))

    default = stopping_table(thresholds=thresholds, policy=policy)
    default_predicted = predicted(default)

    def keep_default(reason: str) -> LearnedTable:
        return LearnedTable(default, False, population, default_predicted, default_predicted, reason)

    def checked(learned: LearnedTable) -> LearnedTable:
        """``learned``, unless one of its tables harms a population the evidence allows."""
        if evidence is None:
            return learned
        region = plausible_region(evidence=evidence, thresholds=thresholds, nats=plausible_nats)
        if region is None:
            return learned
        default_wrong = _wrong_curve(default, region.rates, thresholds)
        for table in [learned.table] + ([learned.cheaper] if learned.cheaper is not None else []):
            harm = _harm(
                regions=[region], tables=[table], default_wrongs=[default_wrong], shares=[1.0], thresholds=thresholds
            )
            if harm is not None:
                return keep_default(
                    f"the learned table could be {harm[0]:.2%} wrong outside the zones on a population the evidence "
                    f"allows (within {plausible_nats:g} nats of the best fit), where the rule's bound is {harm[1]:.2%}"
                )
        return learned

    if policy.kind != "adaptive" or policy.rule != "calibrated":
        return keep_default("only the adaptive calibrated rule is learned")
    if population.tasks < min_tasks:
        return keep_default(f"{population.tasks} tasks with evidence, fewer than {min_tasks}")
    rates, weights = np.asarray(population.pass_rates), np.asarray(population.weights)
    outside = _outside_zones(rates, thresholds)
    masks = [mask & outside for mask in _slice_masks(rates, thresholds)]
    live = [index for index, mask in enumerate(masks) if weights[mask].sum() > 1e-9]

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

    search = search_prices(
        table_at=table_at,
        runs=runs,
        live=live,
        error_target=error_target,
        slice_target=slice_target,
        iterations=iterations,
    )
    best, closest = search.best, search.closest

    def overshoot(performance: Performance) -> float:
        return _overshoot(performance, error_target, slice_target)

    default_feasible = default_predicted.error <= error_target and default_predicted.worst_slice <= slice_target
    if best is None:
        # Nothing meets the targets: the table that misses them least, if it misses by less than
        # the calibrated rule does (a population piled against a zone edge), else the rule.
        if closest is not None and not default_feasible and overshoot(closest[1]) < overshoot(default_predicted):
            return checked(
                LearnedTable(closest[0], True, population, closest[1], default_predicted, "closest to the targets")
            )
        return keep_default("no table meets the targets under the fitted population")
    if mixture and search.mixture is not None:
        cheaper, cheaper_share, mixed = search.mixture
        if not default_feasible or mixed.rollouts < default_predicted.rollouts:
            return checked(
                LearnedTable(
                    best[0], True, population, mixed, default_predicted, "learned (mixture)", cheaper, cheaper_share
                )
            )
    if default_feasible and best[1].rollouts >= default_predicted.rollouts:
        return keep_default("the calibrated rule is as cheap under the fitted population")
    return checked(LearnedTable(best[0], True, population, best[1], default_predicted, "learned"))


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
