"""An environment's population of pass rates: the fit, its resamples and the populations the evidence allows.

In: (passes, attempts) per task and the thresholds. Out: a ``Population`` (point masses on
``population_support``), bootstrap refits, a ``PlausibleRegion`` and its most damaging members.
Why the fit is nonparametric and how the region is bounded: docs/prediction.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from engine.stats.bands import Thresholds

__all__ = [
    "PLAUSIBLE_NATS",
    "PlausibleRegion",
    "Population",
    "fit_population",
    "most_damaging",
    "most_damaging_together",
    "plausible_region",
    "population_resamples",
    "population_support",
]

# How much less likely than the best fit (in nats of the environment's evidence) a population may
# be and still be one the learned table is held under: 2.71 / 2, the one-sided 90% profile-likelihood
# interval of one quantity (chi-square, one degree of freedom), here a table's error rate.
PLAUSIBLE_NATS = 1.35


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
