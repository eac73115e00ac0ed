"""Empirical-Bayes population prior: a Beta fitted to an environment's calibrated tasks.

Under the default (``calibrated``) stopping rule a prior never decides a band; it shapes the
reported posterior, and the ``posterior`` rule (``SamplingPolicy(rule="posterior")``) decides
with it. See docs/benchmarks-calibration.md for why.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import optimize, special

from engine.stats.posterior import Beta

__all__ = ["fit_population_prior"]


def _clamp_prior(alpha: float, beta: float, *, max_strength: float, min_shape: float) -> Beta:
    """Keep a fitted prior weak: worth at most ``max_strength`` rollouts (mean preserved), and
    no shape below ``min_shape``, which bounds how much mass it can pile up at 0 or 1."""
    strength = alpha + beta
    if strength > max_strength:
        alpha, beta = alpha * max_strength / strength, beta * max_strength / strength
    return Beta(max(alpha, min_shape), max(beta, min_shape))


def fit_population_prior(
    *,
    evidence: Sequence[tuple[int, int]],
    min_tasks: int = 30,
    max_strength: float = 8.0,
    min_shape: float = 0.2,
) -> Beta | None:
    """Fit a Beta prior to an environment's calibrated tasks (empirical Bayes).

    ``evidence`` is one (successes, attempts) pair per task. The fit maximises the beta-binomial
    marginal likelihood (valid for adaptively stopped tasks too: stopping depends only on the
    observed outcomes, so it does not change the likelihood). Returns None when fewer than
    ``min_tasks`` tasks have attempts; callers then keep Jeffreys. The result is clamped
    (``max_strength`` rollouts' worth at most, shapes at least ``min_shape``) so it informs the
    first rounds without deciding a task on its own.
    """
    pairs = np.asarray(list(evidence), dtype=float).reshape(-1, 2)
    if pairs.size and (np.any(pairs < 0) or np.any(pairs[:, 0] > pairs[:, 1])):
        raise ValueError("evidence must hold (successes, attempts) pairs with 0 <= successes <= attempts")
    pairs = pairs[pairs[:, 1] > 0]
    if len(pairs) < max(min_tasks, 2):
        return None
    # Identical (successes, attempts) pairs share one likelihood term.
    unique_pairs, multiplicity = np.unique(pairs, axis=0, return_counts=True)
    successes, attempts = unique_pairs[:, 0], unique_pairs[:, 1]
    failures = attempts - successes

    def negative_log_likelihood(log_shapes: np.ndarray) -> tuple[float, np.ndarray]:
        alpha, beta = np.exp(log_shapes)
        value = np.sum(
            multiplicity * (special.betaln(alpha + successes, beta + failures) - special.betaln(alpha, beta))
        )
        digamma_total = special.digamma(alpha + beta + attempts) - special.digamma(alpha + beta)
        d_alpha = np.sum(multiplicity * (special.digamma(alpha + successes) - special.digamma(alpha) - digamma_total))
        d_beta = np.sum(multiplicity * (special.digamma(beta + failures) - special.digamma(beta) - digamma_total))
        return -float(value), -np.array([d_alpha * alpha, d_beta * beta])

    # Start from the method of moments on the observed rates.
    rates = pairs[:, 0] / pairs[:, 1]
    mean = float(np.clip(rates.mean(), 0.01, 0.99))
    variance = float(max(rates.var(), 1e-4))
    start_strength = float(np.clip(mean * (1 - mean) / variance - 1.0, 0.1, 100.0))
    start = np.log([mean * start_strength, (1 - mean) * start_strength])
    result = optimize.minimize(
        negative_log_likelihood,
        start,
        jac=True,
        method="L-BFGS-B",
        # Without overdispersion the likelihood keeps rising with strength; the clamp caps it.
        bounds=[(-7.0, 9.0), (-7.0, 9.0)],
    )
    alpha, beta = np.exp(result.x if np.all(np.isfinite(result.x)) else start)
    return _clamp_prior(float(alpha), float(beta), max_strength=max_strength, min_shape=min_shape)
