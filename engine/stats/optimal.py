"""The Bayes-optimal stopping table for a known population: the bound a real policy is compared with.

Given the true distribution of pass rates (a discrete prior on a grid), backward induction over
the round schedule finds the table that minimises

    rollout_cost * E[rollouts] + P(a label the zones do not accept)

averaged over the population. No real policy can spend fewer rollouts for the same average error
on that population, because no real policy knows the population exactly; the benchmark reports it
beside the running policy. It makes no promise per task.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

from engine.stats.bands import LABELS, Thresholds, acceptable_bands
from engine.stats.sequential import CONTINUE, SamplingPolicy, round_schedule
from engine.stats.tables import StoppingTable

__all__ = ["bayes_optimal_table"]


def _log_likelihood(pass_rates: np.ndarray, attempts: int) -> np.ndarray:
    """log p^s (1-p)^(n-s) for s = 0..n (rows) and each pass rate (columns); 0 * log 0 = 0."""
    successes = np.arange(attempts + 1)[:, None]
    failures = attempts - successes
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pass = np.where(successes > 0, successes * np.log(pass_rates)[None, :], 0.0)
        log_fail = np.where(failures > 0, failures * np.log1p(-pass_rates)[None, :], 0.0)
    log_pass = np.where((successes > 0) & (pass_rates[None, :] == 0.0), -np.inf, log_pass)
    log_fail = np.where((failures > 0) & (pass_rates[None, :] == 1.0), -np.inf, log_fail)
    return log_pass + log_fail


def bayes_optimal_table(
    *,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    pass_rates: Sequence[float],
    weights: Sequence[float],
    rollout_cost: float,
    error_weights: Sequence[float] | None = None,
) -> StoppingTable:
    """The stopping table minimising rollout_cost * E[rollouts] + P(wrong) under a known population.

    ``pass_rates``/``weights``: the population as point masses (weights need not sum to 1).
    ``error_weights``: optional, what a wrong label costs at each pass rate (default 1 everywhere);
    the benchmark uses it to price errors per slice of pass rates (a Lagrangian lower bound).
    Uses ``policy``'s round size and cap; it never answers borderline (a band is never worse).
    """
    rates = np.asarray(pass_rates, dtype=float)
    mass = np.asarray(weights, dtype=float)
    if rates.shape != mass.shape or np.any(mass < 0) or mass.sum() <= 0:
        raise ValueError("pass_rates and weights must have one non-negative weight per rate")
    if np.any((rates < 0) | (rates > 1)):
        raise ValueError("pass_rates must lie in [0, 1]")
    if rollout_cost <= 0:
        raise ValueError(f"rollout_cost must be positive; got {rollout_cost}")
    penalty = np.ones(rates.shape) if error_weights is None else np.asarray(error_weights, dtype=float)
    if penalty.shape != rates.shape or np.any(penalty < 0):
        raise ValueError("error_weights must have one non-negative weight per pass rate")
    keep = mass > 0
    rates, log_mass, penalty = rates[keep], np.log(mass[keep] / mass.sum()), penalty[keep]
    wrong = penalty[None, :] * np.array(
        [
            [band not in acceptable_bands(pass_rate=float(rate), thresholds=thresholds) for rate in rates]
            for band in LABELS[:3]
        ],
        dtype=float,
    )
    schedule = round_schedule(SamplingPolicy(round_size=policy.round_size, cap=policy.cap))
    labels: list[np.ndarray] = [np.empty(0, dtype=np.int8)] * len(schedule)
    # Values are kept per path (one sequence of outcomes), divided by the path's total
    # probability `scale`, so that nothing underflows at a few hundred rollouts.
    next_value: np.ndarray | None = None
    next_log_scale = np.empty(0)
    for index in range(len(schedule) - 1, -1, -1):
        attempts = schedule[index]
        joint = _log_likelihood(rates, attempts) + log_mass[None, :]
        log_scale = special.logsumexp(joint, axis=1)
        with np.errstate(invalid="ignore"):
            posterior = np.nan_to_num(np.exp(joint - log_scale[:, None]))  # impossible states: 0
        stop_error = posterior @ wrong.T  # P(wrong | state) for each band
        stop = stop_error.min(axis=1) + rollout_cost * attempts
        best = stop_error.argmin(axis=1).astype(np.int8)
        if next_value is None:
            labels[index], value = best, stop
        else:
            new = schedule[index + 1] - attempts
            passes = np.arange(new + 1)
            log_paths = special.gammaln(new + 1) - special.gammaln(passes + 1) - special.gammaln(new - passes + 1)
            successor = np.arange(attempts + 1)[:, None] + passes[None, :]
            weight = np.exp(log_paths[None, :] + next_log_scale[successor] - log_scale[:, None])
            weight = np.where(np.isfinite(log_scale)[:, None], weight, 0.0)
            carry_on = (weight * next_value[successor]).sum(axis=1)
            more = carry_on < stop
            labels[index] = np.where(more, np.int8(CONTINUE), best).astype(np.int8)
            value = np.where(more, carry_on, stop)
        next_value, next_log_scale = np.nan_to_num(value), log_scale
    return StoppingTable(attempts=tuple(schedule), labels=tuple(labels))
