"""Model ladder: a cheap model's evidence as a prior for a strong model, and how two models agree.

Under the default (``calibrated``) stopping rule a ladder prior no longer changes how many
rollouts a task gets (docs/calibration.md says why); the functions stay for the ``posterior``
rule, for ordering work by the cheap model's estimate, and for the model comparison page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # scipy.stats loads on first use: it costs most of a process's start
from scipy import special

from engine.stats.agreement import agreement_from_counts, label_counts
from engine.stats.bands import BANDS
from engine.stats.posterior import (
    JEFFREYS_PRIOR,
    Beta,
    _check_integer_counts,
    _check_prior,
)
from engine.stats.priors import _clamp_prior

__all__ = [
    "BandAgreement",
    "LogitShift",
    "band_agreement",
    "fit_logit_shift",
    "ladder_prior",
    "spearman_correlation",
]


@dataclass(frozen=True)
class LogitShift:
    """How much easier tasks are for the strong model, on the logit scale.

    ``shift``: weighted median of logit(strong) - logit(cheap) over tasks both probed.
    ``spread``: robust (weighted median absolute deviation, scaled to a normal sd) spread of those
    differences: how far one task can stray from the ladder. ``tasks``: how many were used.
    """

    shift: float
    spread: float
    tasks: int


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2.0)])


def _logit(x):
    return np.log(x) - np.log1p(-x)


def fit_logit_shift(
    *,
    cheap: Sequence[tuple[int, int]],
    strong: Sequence[tuple[int, int]],
    prior: Sequence[float] = JEFFREYS_PRIOR,
    min_tasks: int = 10,
) -> LogitShift | None:
    """Fit the logit shift between a cheap and a strong model from tasks both probed.

    ``cheap[i]`` and ``strong[i]`` are (successes, attempts) for the same task. Each task gives
    logit(posterior mean, strong) - logit(posterior mean, cheap), weighted by the inverse of the
    summed posterior variances of the logits (trigamma(alpha) + trigamma(beta)), so a 0/8 task,
    which says little, weighs little. The weighted median resists tasks the ladder does not fit.
    Returns None with fewer than ``min_tasks`` tasks probed by both.
    """
    prior = _check_prior(prior)
    cheap_pairs = np.asarray(list(cheap), dtype=float).reshape(-1, 2)
    strong_pairs = np.asarray(list(strong), dtype=float).reshape(-1, 2)
    if len(cheap_pairs) != len(strong_pairs):
        raise ValueError(f"cheap and strong must list the same tasks; got {len(cheap_pairs)} and {len(strong_pairs)}")
    for name, pairs in (("cheap", cheap_pairs), ("strong", strong_pairs)):
        if pairs.size and (np.any(pairs < 0) or np.any(pairs[:, 0] > pairs[:, 1])):
            raise ValueError(f"{name} must hold (successes, attempts) pairs with 0 <= successes <= attempts")
    both = (cheap_pairs[:, 1] > 0) & (strong_pairs[:, 1] > 0)
    if both.sum() < max(min_tasks, 1):
        return None
    logit_means, logit_variances = [], []
    for pairs in (cheap_pairs[both], strong_pairs[both]):
        alpha = prior.alpha + pairs[:, 0]
        beta = prior.beta + pairs[:, 1] - pairs[:, 0]
        logit_means.append(_logit(alpha / (alpha + beta)))
        logit_variances.append(special.polygamma(1, alpha) + special.polygamma(1, beta))
    differences = logit_means[1] - logit_means[0]
    weights = 1.0 / (logit_variances[0] + logit_variances[1])
    shift = _weighted_median(differences, weights)
    spread = 1.4826 * _weighted_median(np.abs(differences - shift), weights)
    return LogitShift(shift=shift, spread=spread, tasks=int(both.sum()))


def ladder_prior(
    *,
    successes: int,
    attempts: int,
    ladder: LogitShift,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    max_strength: float = 8.0,
    min_shape: float = 0.2,
) -> Beta:
    """A Beta prior for the strong model from the cheap model's (successes, attempts) on a task.

    Mean: the cheap posterior mean moved by ``ladder.shift`` on the logit scale. Strength: the
    smallest of the cheap evidence (prior strength + attempts), what the ladder's spread allows
    (a Beta with logit variance spread^2 has strength about 1 / (spread^2 m (1 - m))), and
    ``max_strength`` (default one round of 8). Shapes are at least ``min_shape``. So it informs
    the first rounds but, with the rule's no-decision-at-zero-attempts, never decides alone.
    """
    _check_integer_counts(successes, attempts)
    prior = _check_prior(prior)
    cheap_mean = (prior.alpha + successes) / (prior.strength + attempts)
    strong_mean = float(special.expit(_logit(cheap_mean) + ladder.shift))
    strength = min(max_strength, prior.strength + attempts)
    logit_variance_scale = ladder.spread**2 * strong_mean * (1.0 - strong_mean)
    if logit_variance_scale > 0:
        strength = min(strength, 1.0 / logit_variance_scale)
    return _clamp_prior(
        strong_mean * strength, (1.0 - strong_mean) * strength, max_strength=max_strength, min_shape=min_shape
    )


def spearman_correlation(*, first: Sequence[float], second: Sequence[float]) -> float | None:
    """Spearman rank correlation of two models' pass rates on the same tasks (ties averaged).

    Returns None when it is undefined: fewer than 3 tasks, or one side constant.
    """
    first_rates = np.asarray(first, dtype=float)
    second_rates = np.asarray(second, dtype=float)
    if first_rates.shape != second_rates.shape:
        raise ValueError(f"first and second must list the same tasks; got {first_rates.size} and {second_rates.size}")
    if first_rates.size < 3 or np.ptp(first_rates) == 0 or np.ptp(second_rates) == 0:
        return None
    return float(scipy.stats.spearmanr(first_rates, second_rates).statistic)


@dataclass(frozen=True)
class BandAgreement:
    """How often two models put the same tasks in the same band.

    ``counts[(first band, second band)]``: tasks per pair of labels (all labels, incl. undecided).
    ``tasks``: tasks with a decided band (too_hard, in_band, retire) under both models.
    ``agreement``: share of those with the same band; ``cohen_kappa``: agreement beyond chance.
    Both are None when no task is decided under both.
    """

    tasks: int
    agreement: float | None
    cohen_kappa: float | None
    counts: dict[tuple[str, str], int]


def band_agreement(*, first: Sequence[str], second: Sequence[str]) -> BandAgreement:
    """Compare two models' bands task by task (``first[i]`` and ``second[i]`` are one task)."""
    counts = label_counts(first=first, second=second)
    decided = {pair: count for pair, count in counts.items() if pair[0] in BANDS and pair[1] in BANDS}
    if not decided:
        return BandAgreement(tasks=0, agreement=None, cohen_kappa=None, counts=counts)
    measured = agreement_from_counts(decided)
    return BandAgreement(
        tasks=measured.n, agreement=measured.agreement.estimate, cohen_kappa=measured.kappa.estimate, counts=counts
    )
