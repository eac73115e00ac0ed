"""The Beta posterior of a pass rate and what is read off it: intervals, band probabilities and
the GRPO signal. Pure (numpy and scipy only)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
import scipy  # scipy.stats loads on first use: it costs most of a process's start
from scipy import special

from engine.stats.bands import Thresholds

__all__ = [
    "JEFFREYS_PRIOR",
    "BandProbabilities",
    "Beta",
    "Interval",
    "Sided",
    "band_probabilities",
    "clopper_pearson_interval",
    "expected_grpo_signal",
    "grpo_signal",
    "jeffreys_interval",
    "posterior",
    "posterior_interval",
    "wilson_interval",
]

Sided = Literal["two-sided", "upper", "lower"]


class Beta(NamedTuple):
    """A Beta(alpha, beta) distribution over a pass rate: a prior or a posterior."""

    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def strength(self) -> float:
        """Effective sample size: how many rollouts' worth of evidence it carries."""
        return self.alpha + self.beta


JEFFREYS_PRIOR = Beta(0.5, 0.5)


class Interval(NamedTuple):
    low: float
    high: float


class BandProbabilities(NamedTuple):
    """Posterior P(p < floor), P(floor <= p < retire_at), P(p >= retire_at); they sum to 1."""

    too_hard: float
    in_band: float
    retire: float


def _check_prior(prior: Sequence[float], name: str = "prior") -> Beta:
    try:
        alpha, beta = (float(value) for value in prior)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (alpha, beta); got {prior!r}")
    if not (alpha > 0.0 and beta > 0.0 and math.isfinite(alpha) and math.isfinite(beta)):
        raise ValueError(f"{name} must have alpha > 0 and beta > 0; got ({alpha}, {beta})")
    return Beta(alpha, beta)


def _check_counts(successes: float, attempts: float) -> None:
    if attempts < 0:
        raise ValueError(f"attempts must be >= 0; got {attempts}")
    if successes < 0:
        raise ValueError(f"successes must be >= 0; got {successes}")
    if successes > attempts:
        raise ValueError(f"successes ({successes}) cannot exceed attempts ({attempts})")


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1; got {level}")


def _check_integer_counts(successes: int, attempts: int) -> None:
    for name, value in (("successes", successes), ("attempts", attempts)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer; got {value!r}")
    _check_counts(successes, attempts)


def posterior(*, successes: float, attempts: float, prior: Sequence[float] = JEFFREYS_PRIOR) -> Beta:
    """Beta posterior of the pass rate after ``successes`` passes in ``attempts`` rollouts.

    Counts may be fractional (discounted evidence). Returns Beta(alpha + s, beta + n - s).
    """
    prior = _check_prior(prior)
    _check_counts(successes, attempts)
    return Beta(prior.alpha + successes, prior.beta + attempts - successes)


def _cdf(alpha, beta, x):
    return special.betainc(alpha, beta, x)


def _sf(alpha, beta, x):
    # P(p >= x) through the mirrored distribution keeps precision when it is tiny.
    return special.betainc(beta, alpha, 1.0 - np.asarray(x, dtype=float))


def band_probabilities(*, posterior: Sequence[float], thresholds: Thresholds) -> BandProbabilities:
    """Posterior probability of each band: P(p < floor), P(floor <= p < retire_at), P(p >= retire_at)."""
    alpha, beta = _check_prior(posterior, "posterior")
    too_hard = float(_cdf(alpha, beta, thresholds.floor))
    retire = float(_sf(alpha, beta, thresholds.retire_at))
    return BandProbabilities(too_hard, max(0.0, 1.0 - too_hard - retire), retire)


def _tail_levels(level: float, sided: Sided) -> tuple[float, float]:
    """Probabilities cut off below the low end and above the high end of an interval."""
    _check_level(level)
    if sided == "two-sided":
        return (1.0 - level) / 2.0, (1.0 - level) / 2.0
    if sided == "upper":  # an upper bound only: the interval is [0, high]
        return 0.0, 1.0 - level
    if sided == "lower":  # a lower bound only: the interval is [low, 1]
        return 1.0 - level, 0.0
    raise ValueError(f"sided must be 'two-sided', 'upper' or 'lower'; got {sided!r}")


def posterior_interval(
    *,
    successes: float,
    attempts: float,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    level: float = 0.95,
    sided: Sided = "two-sided",
) -> Interval:
    """Equal-tailed credible interval of the Beta posterior.

    ``sided="two-sided"`` puts (1 - level) / 2 in each tail; ``"upper"`` returns [0, upper bound
    at ``level``]; ``"lower"`` returns [lower bound at ``level``, 1]. As Brown, Cai and DasGupta
    (2001) recommend for the Jeffreys interval, the low end is 0 when there are no passes and the
    high end is 1 when every attempt passed.
    """
    alpha, beta = posterior(successes=successes, attempts=attempts, prior=prior)
    low_tail, high_tail = _tail_levels(level, sided)
    low = 0.0 if low_tail == 0.0 or successes == 0 else float(special.betaincinv(alpha, beta, low_tail))
    high = 1.0 if high_tail == 0.0 or successes == attempts else float(special.betaincinv(alpha, beta, 1.0 - high_tail))
    return Interval(low, high)


def jeffreys_interval(
    *, successes: float, attempts: float, level: float = 0.95, sided: Sided = "two-sided"
) -> Interval:
    """Jeffreys interval: the Beta(0.5, 0.5)-posterior interval (see ``posterior_interval``)."""
    return posterior_interval(successes=successes, attempts=attempts, prior=JEFFREYS_PRIOR, level=level, sided=sided)


def clopper_pearson_interval(
    *, successes: int, attempts: int, level: float = 0.95, sided: Sided = "two-sided"
) -> Interval:
    """Exact (Clopper-Pearson) binomial confidence interval; coverage is at least ``level``.

    ``sided="two-sided"`` splits 1 - level between the tails, so the 95% upper end for 0 of 149 is
    1 - 0.025 ** (1 / 149) = 0.0245; ``sided="upper"`` gives the one-sided 95% upper bound
    1 - 0.05 ** (1 / 149) = 0.0199, i.e. "just under 2%". With no attempts it is [0, 1].
    """
    _check_counts(successes, attempts)
    low_tail, high_tail = _tail_levels(level, sided)
    low = (
        0.0
        if low_tail == 0.0 or successes == 0
        else float(special.betaincinv(successes, attempts - successes + 1, low_tail))
    )
    high = (
        1.0
        if high_tail == 0.0 or successes == attempts
        else float(special.betaincinv(successes + 1, attempts - successes, 1.0 - high_tail))
    )
    return Interval(low, high)


def wilson_interval(*, successes: int, attempts: int, level: float = 0.95, sided: Sided = "two-sided") -> Interval:
    """Wilson score interval. Unlike the normal (Wald) interval it stays inside [0, 1] and does
    not collapse to a point at 0 or n passes. With no attempts it is [0, 1]."""
    _check_counts(successes, attempts)
    low_tail, high_tail = _tail_levels(level, sided)
    if attempts == 0:
        return Interval(0.0, 1.0)
    rate = successes / attempts

    def score_bound(tail: float, sign: float) -> float:
        z = float(scipy.stats.norm.isf(tail))
        denominator = 1.0 + z * z / attempts
        centre = (rate + z * z / (2.0 * attempts)) / denominator
        half_width = z * math.sqrt(rate * (1.0 - rate) / attempts + z * z / (4.0 * attempts**2)) / denominator
        return min(1.0, max(0.0, centre + sign * half_width))

    low = 0.0 if low_tail == 0.0 or successes == 0 else score_bound(low_tail, -1.0)
    high = 1.0 if high_tail == 0.0 or successes == attempts else score_bound(high_tail, +1.0)
    return Interval(low, high)


def _check_group_size(group_size: int) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"group_size must be an integer >= 2; got {group_size!r}")


def grpo_signal(*, pass_rate: float, group_size: int = 8) -> float:
    """Probability that a GRPO group of ``group_size`` attempts is mixed: 1 - p^G - (1 - p)^G.

    A group that all passes or all fails has zero advantage everywhere and teaches nothing.
    """
    _check_group_size(group_size)
    if not 0.0 <= pass_rate <= 1.0:
        raise ValueError(f"pass_rate must lie in [0, 1]; got {pass_rate}")
    return max(0.0, 1.0 - pass_rate**group_size - (1.0 - pass_rate) ** group_size)


def expected_grpo_signal(*, posterior: Sequence[float], group_size: int = 8) -> float:
    """Posterior expectation of 1 - p^G - (1 - p)^G for p ~ Beta(alpha, beta).

    Uses E[p^G] = B(alpha + G, beta) / B(alpha, beta). Unlike plugging in a raw 0/n it is not
    exactly zero: the task might still sometimes be solved.
    """
    _check_group_size(group_size)
    alpha, beta = _check_prior(posterior, "posterior")
    all_pass = math.exp(special.betaln(alpha + group_size, beta) - special.betaln(alpha, beta))
    all_fail = math.exp(special.betaln(alpha, beta + group_size) - special.betaln(alpha, beta))
    return max(0.0, 1.0 - all_pass - all_fail)
