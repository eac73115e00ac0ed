"""Pass-rate statistics for calibration: posteriors, intervals, bands and the stopping rule.

A pure module (numpy and scipy only, never Django), so the calibration service, trainers and the
benchmark in ``bench/calibration/`` all run the very same code.

Vocabulary
----------
* ``pass_rate``: the probability ``p`` that one rollout of a task passes its verifier.
* ``band``: ``too_hard`` (p < floor), ``in_band`` (floor <= p < retire_at) or ``retire``
  (p >= retire_at); ``undecided`` while evidence is thin; ``borderline`` when the rollout cap is
  reached without a decision.
* indifference zones: around each threshold a range of true pass rates where either neighbouring
  band is an acceptable answer (a task at 2.1% against a 2% floor is not worth 500 rollouts).

The stopping rule (``assess`` with an adaptive ``SamplingPolicy``)
-------------------------------------------------------------------
With a Beta(alpha, beta) prior and ``s`` passes in ``n`` attempts the posterior is
Beta(alpha + s, beta + n - s). Each band has an *acceptable region* of true pass rates, its own
range widened by the indifference zones:

* ``too_hard`` is acceptable for p < floor_zone.high,
* ``in_band``  is acceptable for floor_zone.low <= p < retire_zone.high,
* ``retire``   is acceptable for p >= retire_zone.low.

After each round, sampling stops when the posterior probability of some band's acceptable region
reaches ``confidence`` (= 1 - delta). When two bands qualify (possible only when the posterior sits
inside a zone, where both are acceptable) the one with the larger band probability wins. A label
outside the zones is therefore wrong only when the posterior put at most delta on the truth.
At the cap an undecided task is ``borderline``. Nothing is decided on zero attempts, so a prior
alone never decides.

The posterior guarantee is an average over the prior; for one fixed true pass rate looking after
every round lets the error at the edge of a zone exceed delta. ``operating_characteristic``
computes that error exactly, and the benchmark reports both.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal, NamedTuple, Sequence

import numpy as np
from scipy import optimize, special
from scipy import stats as scipy_stats

__all__ = [
    "TOO_HARD",
    "IN_BAND",
    "RETIRE",
    "UNDECIDED",
    "BORDERLINE",
    "BANDS",
    "LABELS",
    "CONTINUE",
    "Sided",
    "Beta",
    "JEFFREYS_PRIOR",
    "Interval",
    "BandProbabilities",
    "Thresholds",
    "SamplingPolicy",
    "Assessment",
    "StoppingTable",
    "OperatingCharacteristic",
    "LogitShift",
    "BandAgreement",
    "CheckpointEvidence",
    "posterior",
    "band_probabilities",
    "band_for_rate",
    "posterior_interval",
    "jeffreys_interval",
    "clopper_pearson_interval",
    "wilson_interval",
    "grpo_signal",
    "expected_grpo_signal",
    "assess",
    "stopping_table",
    "operating_characteristic",
    "fit_population_prior",
    "fit_logit_shift",
    "ladder_prior",
    "spearman_correlation",
    "band_agreement",
    "discounted_posterior",
    "assess_discounted",
]

TOO_HARD = "too_hard"
IN_BAND = "in_band"
RETIRE = "retire"
UNDECIDED = "undecided"
BORDERLINE = "borderline"
BANDS: tuple[str, str, str] = (TOO_HARD, IN_BAND, RETIRE)
# Stopping tables store small integer codes: an index into LABELS, or CONTINUE.
LABELS: tuple[str, str, str, str] = (TOO_HARD, IN_BAND, RETIRE, BORDERLINE)
CONTINUE = -1

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


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


def _as_zone(name: str, zone: Sequence[float]) -> tuple[float, float]:
    try:
        low, high = (float(edge) for edge in zone)
    except (TypeError, ValueError):
        raise ValueError(f"Thresholds.{name} must be a pair (low, high) of numbers; got {zone!r}")
    return low, high


@dataclass(frozen=True)
class Thresholds:
    """An environment's band thresholds and the indifference zones around them.

    ``floor`` and ``retire_at`` split pass rates into bands. ``floor_zone`` and ``retire_zone`` are
    half-open ranges [low, high) containing their threshold; a task whose true pass rate lies in
    a zone may be labelled with either neighbouring band. Invalid values raise ``ValueError``
    naming the field.
    """

    floor: float = 0.02
    retire_at: float = 0.70
    floor_zone: tuple[float, float] = (0.01, 0.04)
    retire_zone: tuple[float, float] = (0.60, 0.80)

    def __post_init__(self) -> None:
        for name in ("floor", "retire_at"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
                raise ValueError(f"Thresholds.{name} must be a number; got {value!r}")
        if not 0.0 < self.floor < 1.0:
            raise ValueError(f"Thresholds.floor must lie strictly between 0 and 1; got {self.floor}")
        if not 0.0 < self.retire_at < 1.0:
            raise ValueError(
                f"Thresholds.retire_at must lie strictly between 0 and 1; got {self.retire_at}"
            )
        if not self.floor < self.retire_at:
            raise ValueError(
                f"Thresholds.retire_at ({self.retire_at}) must be above floor ({self.floor})"
            )
        # Callers may pass lists (JSON settings); store tuples so the instance stays hashable.
        floor_zone = _as_zone("floor_zone", self.floor_zone)
        retire_zone = _as_zone("retire_zone", self.retire_zone)
        object.__setattr__(self, "floor_zone", floor_zone)
        object.__setattr__(self, "retire_zone", retire_zone)
        if not 0.0 <= floor_zone[0] <= self.floor <= floor_zone[1] <= 1.0:
            raise ValueError(
                f"Thresholds.floor_zone {floor_zone} must contain floor={self.floor}: "
                "need 0 <= floor_zone[0] <= floor <= floor_zone[1]"
            )
        if not 0.0 <= retire_zone[0] <= self.retire_at <= retire_zone[1] <= 1.0:
            raise ValueError(
                f"Thresholds.retire_zone {retire_zone} must contain retire_at={self.retire_at}: "
                "need retire_zone[0] <= retire_at <= retire_zone[1] <= 1"
            )
        if floor_zone[1] > retire_zone[0]:
            raise ValueError(
                f"Thresholds.floor_zone {floor_zone} overlaps retire_zone {retire_zone}: "
                "floor_zone[1] must not exceed retire_zone[0]"
            )

    @classmethod
    def with_default_zones(cls, *, floor: float, retire_at: float) -> "Thresholds":
        """Thresholds for an environment's own floor and retire_at, with zones scaled to them.

        The floor zone is [floor / 2, 2 * floor) (a factor of two either side, since pass rates
        near zero differ by ratios) and the retire zone is retire_at +/- 0.10; both are clipped
        so that they stay inside [0, 1] and do not overlap. The defaults reproduce
        ``Thresholds()``.
        """
        midpoint = (floor + retire_at) / 2.0
        floor_zone = (floor / 2.0, min(2.0 * floor, midpoint))
        retire_zone = (max(retire_at - 0.10, midpoint), min(retire_at + 0.10, 1.0))
        return cls(
            floor=floor,
            retire_at=retire_at,
            floor_zone=(round(floor_zone[0], 12), round(floor_zone[1], 12)),
            retire_zone=(round(retire_zone[0], 12), round(retire_zone[1], 12)),
        )


@dataclass(frozen=True)
class SamplingPolicy:
    """How many rollouts to spend on a task.

    ``kind="adaptive"``: rounds of ``round_size`` rollouts (one GRPO group) until the stopping
    rule decides a band with ``confidence``, or ``cap`` rollouts are spent (then ``borderline``).
    ``kind="fixed"``: exactly ``fixed_n`` rollouts, then the band of the raw pass rate, as papers
    do. Invalid values raise ``ValueError`` naming the field.
    """

    kind: Literal["adaptive", "fixed"] = "adaptive"
    round_size: int = 8
    confidence: float = 0.95
    cap: int = 256
    fixed_n: int = 16

    def __post_init__(self) -> None:
        if self.kind not in ("adaptive", "fixed"):
            raise ValueError(f"SamplingPolicy.kind must be 'adaptive' or 'fixed'; got {self.kind!r}")
        for name in ("round_size", "cap", "fixed_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"SamplingPolicy.{name} must be a positive integer; got {value!r}")
        if not isinstance(self.confidence, numbers.Real) or not 0.5 < self.confidence < 1.0:
            raise ValueError(
                f"SamplingPolicy.confidence must lie strictly between 0.5 and 1; got {self.confidence!r}"
            )
        if self.cap < self.round_size:
            raise ValueError(
                f"SamplingPolicy.cap ({self.cap}) must be at least round_size ({self.round_size})"
            )

    @property
    def delta(self) -> float:
        """The error the stopping rule tolerates per decision: 1 - confidence."""
        return 1.0 - self.confidence


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


# ---------------------------------------------------------------------------------------------
# Posterior, bands, intervals, GRPO signal
# ---------------------------------------------------------------------------------------------


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


def band_for_rate(*, pass_rate: float, thresholds: Thresholds) -> str:
    """The band a pass rate falls in: too_hard below floor, retire at or above retire_at."""
    if pass_rate < thresholds.floor:
        return TOO_HARD
    if pass_rate >= thresholds.retire_at:
        return RETIRE
    return IN_BAND


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
    high = (
        1.0
        if high_tail == 0.0 or successes == attempts
        else float(special.betaincinv(alpha, beta, 1.0 - high_tail))
    )
    return Interval(low, high)


def jeffreys_interval(
    *, successes: float, attempts: float, level: float = 0.95, sided: Sided = "two-sided"
) -> Interval:
    """Jeffreys interval: the Beta(0.5, 0.5)-posterior interval (see ``posterior_interval``)."""
    return posterior_interval(
        successes=successes, attempts=attempts, prior=JEFFREYS_PRIOR, level=level, sided=sided
    )


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


def wilson_interval(
    *, successes: int, attempts: int, level: float = 0.95, sided: Sided = "two-sided"
) -> Interval:
    """Wilson score interval. Unlike the normal (Wald) interval it stays inside [0, 1] and does
    not collapse to a point at 0 or n passes. With no attempts it is [0, 1]."""
    _check_counts(successes, attempts)
    low_tail, high_tail = _tail_levels(level, sided)
    if attempts == 0:
        return Interval(0.0, 1.0)
    rate = successes / attempts

    def score_bound(tail: float, sign: float) -> float:
        z = float(scipy_stats.norm.isf(tail))
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


# ---------------------------------------------------------------------------------------------
# The stopping rule
# ---------------------------------------------------------------------------------------------


def _decision_codes(
    *,
    successes: np.ndarray,
    attempts: float,
    prior: Beta,
    thresholds: Thresholds,
    confidence: float,
) -> np.ndarray:
    """The adaptive rule for many success counts at one number of attempts (vectorised).

    Returns, per entry, the index into BANDS of the decided band, or CONTINUE. Both ``assess``
    and ``stopping_table`` go through here, so the benchmark measures the code the service runs.
    """
    successes = np.asarray(successes, dtype=float)
    alpha = prior.alpha + successes
    beta = prior.beta + attempts - successes
    floor_low, floor_high = thresholds.floor_zone
    retire_low, retire_high = thresholds.retire_zone
    acceptable = np.stack(
        [
            _cdf(alpha, beta, floor_high),  # too_hard: p < floor_zone high
            _cdf(alpha, beta, retire_high) - _cdf(alpha, beta, floor_low),  # in_band
            _sf(alpha, beta, retire_low),  # retire: p >= retire_zone low
        ]
    )
    too_hard = _cdf(alpha, beta, thresholds.floor)
    retire = _sf(alpha, beta, thresholds.retire_at)
    band = np.stack([too_hard, 1.0 - too_hard - retire, retire])
    qualifies = acceptable >= confidence
    # Inside a zone two bands can qualify; both are acceptable, take the more probable band.
    score = np.where(qualifies, band, -np.inf)
    codes = np.argmax(score, axis=0).astype(np.int8)
    return np.where(qualifies.any(axis=0), codes, np.int8(CONTINUE)).astype(np.int8)


@dataclass(frozen=True)
class Assessment:
    """What calibration knows about one task after some rollouts.

    * ``attempts``, ``successes``: the raw evidence (pass and fail outcomes only).
    * ``effective_attempts``, ``effective_successes``: what the posterior used; equal to the raw
      counts except for discounted (drift) evidence.
    * ``pass_rate``: the posterior mean, defined with no attempts and never exactly 0 or 1.
    * ``observed_rate``: effective successes / effective attempts (None with no attempts); a
      fixed policy labels by this, as papers do.
    * ``interval_low``, ``interval_high``: two-sided equal-tailed posterior interval at
      ``interval_level`` (the Jeffreys interval under the default prior).
    * ``band``: too_hard, in_band, retire, undecided or borderline.
    * ``band_probabilities``: posterior P(too_hard), P(in_band), P(retire).
    * ``grpo_signal``: posterior expected probability that a group of ``group_size`` is mixed.
    * ``decided``: a band was decided (with the stated confidence, for adaptive sampling).
    * ``next_round``: rollouts to request next; 0 when sampling is over (decided or borderline).
    * ``posterior``, ``prior``: the Beta distributions used.
    """

    attempts: int
    successes: int
    pass_rate: float
    observed_rate: float | None
    interval_low: float
    interval_high: float
    interval_level: float
    band: str
    band_probabilities: BandProbabilities
    grpo_signal: float
    decided: bool
    next_round: int
    posterior: Beta
    prior: Beta
    effective_attempts: float
    effective_successes: float


def _assessment(
    *,
    attempts: int,
    successes: int,
    effective_attempts: float,
    effective_successes: float,
    attempts_toward_cap: int,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Beta,
    group_size: int,
    interval_level: float,
) -> Assessment:
    if not isinstance(thresholds, Thresholds):
        raise TypeError(f"thresholds must be a Thresholds; got {type(thresholds).__name__}")
    if not isinstance(policy, SamplingPolicy):
        raise TypeError(f"policy must be a SamplingPolicy; got {type(policy).__name__}")
    _check_group_size(group_size)
    _check_level(interval_level)
    beta_posterior = posterior(successes=effective_successes, attempts=effective_attempts, prior=prior)
    observed_rate = effective_successes / effective_attempts if effective_attempts > 0 else None

    if policy.kind == "fixed":
        if attempts_toward_cap >= policy.fixed_n and observed_rate is not None:
            band, decided, next_round = band_for_rate(pass_rate=observed_rate, thresholds=thresholds), True, 0
        else:
            band, decided, next_round = UNDECIDED, False, policy.fixed_n - attempts_toward_cap
    else:
        code = CONTINUE
        if attempts > 0:  # the prior alone never decides
            code = int(
                _decision_codes(
                    successes=np.array([effective_successes]),
                    attempts=effective_attempts,
                    prior=prior,
                    thresholds=thresholds,
                    confidence=policy.confidence,
                )[0]
            )
        if code != CONTINUE:
            band, decided, next_round = BANDS[code], True, 0
        elif attempts_toward_cap >= policy.cap:
            band, decided, next_round = BORDERLINE, False, 0
        else:
            band, decided = UNDECIDED, False
            next_round = min(policy.round_size, policy.cap - attempts_toward_cap)

    interval = posterior_interval(
        successes=effective_successes, attempts=effective_attempts, prior=prior, level=interval_level
    )
    return Assessment(
        attempts=attempts,
        successes=successes,
        pass_rate=beta_posterior.mean,
        observed_rate=observed_rate,
        interval_low=interval.low,
        interval_high=interval.high,
        interval_level=interval_level,
        band=band,
        band_probabilities=band_probabilities(posterior=beta_posterior, thresholds=thresholds),
        grpo_signal=expected_grpo_signal(posterior=beta_posterior, group_size=group_size),
        decided=decided,
        next_round=next_round,
        posterior=beta_posterior,
        prior=prior,
        effective_attempts=float(effective_attempts),
        effective_successes=float(effective_successes),
    )


def _check_integer_counts(successes: int, attempts: int) -> None:
    for name, value in (("successes", successes), ("attempts", attempts)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer; got {value!r}")
    _check_counts(successes, attempts)


def assess(
    *,
    successes: int,
    attempts: int,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    group_size: int = 8,
    interval_level: float = 0.95,
) -> Assessment:
    """Band, estimate and next step for a task with ``successes`` passes in ``attempts`` rollouts.

    Pure, deterministic and cheap: call it after every round, and again on stored evidence when
    an environment's thresholds change. ``prior`` is Jeffreys by default, or a population prior
    (``fit_population_prior``) or ladder prior (``ladder_prior``). Only pass and fail outcomes
    count as attempts; errors and timeouts are not evidence.
    """
    _check_integer_counts(successes, attempts)
    return _assessment(
        attempts=int(attempts),
        successes=int(successes),
        effective_attempts=float(attempts),
        effective_successes=float(successes),
        attempts_toward_cap=int(attempts),
        thresholds=thresholds,
        policy=policy,
        prior=_check_prior(prior),
        group_size=group_size,
        interval_level=interval_level,
    )


@dataclass(frozen=True)
class StoppingTable:
    """The whole stopping rule as a table, for simulation and exact error rates.

    ``attempts[k]`` is the number of rollouts after round k; ``labels[k][s]`` is the code
    (index into LABELS, or CONTINUE) that ``assess`` gives for s passes at that point.
    The last round never continues: it decides, or labels borderline (adaptive) or by the raw
    pass rate (fixed).
    """

    attempts: tuple[int, ...]
    labels: tuple[np.ndarray, ...]


def _round_schedule(policy: SamplingPolicy) -> list[int]:
    if policy.kind == "fixed":
        return [policy.fixed_n]
    schedule = list(range(policy.round_size, policy.cap, policy.round_size))
    return schedule + [policy.cap]


def stopping_table(
    *, thresholds: Thresholds, policy: SamplingPolicy, prior: Sequence[float] = JEFFREYS_PRIOR
) -> StoppingTable:
    """Tabulate ``assess`` at every round boundary of ``policy`` for every possible pass count."""
    prior = _check_prior(prior)
    labels: list[np.ndarray] = []
    schedule = _round_schedule(policy)
    for attempts in schedule:
        successes = np.arange(attempts + 1)
        if policy.kind == "fixed":
            rate = successes / attempts
            codes = np.where(rate < thresholds.floor, 0, np.where(rate < thresholds.retire_at, 1, 2))
        else:
            codes = _decision_codes(
                successes=successes,
                attempts=attempts,
                prior=prior,
                thresholds=thresholds,
                confidence=policy.confidence,
            )
            if attempts >= policy.cap:
                codes = np.where(codes == CONTINUE, LABELS.index(BORDERLINE), codes)
        labels.append(codes.astype(np.int8))
    return StoppingTable(attempts=tuple(schedule), labels=tuple(labels))


@dataclass(frozen=True)
class OperatingCharacteristic:
    """Exact behaviour of a policy for one true pass rate.

    ``label_probabilities`` maps too_hard, in_band, retire and borderline to the probability of
    ending with that label; ``expected_attempts`` is the mean number of rollouts spent.
    """

    pass_rate: float
    label_probabilities: dict[str, float]
    expected_attempts: float

    def error(self, *, thresholds: Thresholds) -> float:
        """Probability of ending with any label other than the true band (borderline counts)."""
        truth = band_for_rate(pass_rate=self.pass_rate, thresholds=thresholds)
        return 1.0 - self.label_probabilities[truth]


def operating_characteristic(
    *,
    pass_rate: float,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    table: StoppingTable | None = None,
) -> OperatingCharacteristic:
    """Exact label probabilities and expected rollouts when the true pass rate is ``pass_rate``.

    Propagates the distribution of the pass count round by round through the stopping table (no
    simulation). Pass ``table`` to reuse one across many pass rates.
    """
    if not 0.0 <= pass_rate <= 1.0:
        raise ValueError(f"pass_rate must lie in [0, 1]; got {pass_rate}")
    table = table or stopping_table(thresholds=thresholds, policy=policy, prior=prior)
    label_mass = np.zeros(len(LABELS))
    expected_attempts = 0.0
    still_sampling = np.array([1.0])  # probability of each pass count among undecided paths
    previous_attempts = 0
    for attempts, codes in zip(table.attempts, table.labels):
        new_rollouts = attempts - previous_attempts
        round_pmf = scipy_stats.binom.pmf(np.arange(new_rollouts + 1), new_rollouts, pass_rate)
        still_sampling = np.convolve(still_sampling, round_pmf)
        stopping = codes != CONTINUE
        label_mass += np.bincount(codes[stopping], weights=still_sampling[stopping], minlength=len(LABELS))
        expected_attempts += attempts * float(still_sampling[stopping].sum())
        still_sampling = np.where(stopping, 0.0, still_sampling)
        previous_attempts = attempts
    return OperatingCharacteristic(
        pass_rate=pass_rate,
        label_probabilities={label: float(mass) for label, mass in zip(LABELS, label_mass)},
        expected_attempts=expected_attempts,
    )


# ---------------------------------------------------------------------------------------------
# Empirical-Bayes population prior
# ---------------------------------------------------------------------------------------------


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
        d_alpha = np.sum(
            multiplicity * (special.digamma(alpha + successes) - special.digamma(alpha) - digamma_total)
        )
        d_beta = np.sum(
            multiplicity * (special.digamma(beta + failures) - special.digamma(beta) - digamma_total)
        )
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


# ---------------------------------------------------------------------------------------------
# Model ladder: a cheap model's evidence as a prior for a strong model
# ---------------------------------------------------------------------------------------------


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
        raise ValueError(
            f"cheap and strong must list the same tasks; got {len(cheap_pairs)} and {len(strong_pairs)}"
        )
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
        raise ValueError(
            f"first and second must list the same tasks; got {first_rates.size} and {second_rates.size}"
        )
    if first_rates.size < 3 or np.ptp(first_rates) == 0 or np.ptp(second_rates) == 0:
        return None
    return float(scipy_stats.spearmanr(first_rates, second_rates).statistic)


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
    if len(first) != len(second):
        raise ValueError(f"first and second must list the same tasks; got {len(first)} and {len(second)}")
    counts: dict[tuple[str, str], int] = {}
    for pair in zip(first, second):
        counts[pair] = counts.get(pair, 0) + 1
    matrix = np.array([[counts.get((row, column), 0) for column in BANDS] for row in BANDS], dtype=float)
    decided = int(matrix.sum())
    if decided == 0:
        return BandAgreement(tasks=0, agreement=None, cohen_kappa=None, counts=counts)
    observed = float(np.trace(matrix)) / decided
    chance = float(matrix.sum(axis=1) @ matrix.sum(axis=0)) / decided**2
    kappa = None if chance >= 1.0 else (observed - chance) / (1.0 - chance)
    return BandAgreement(tasks=decided, agreement=observed, cohen_kappa=kappa, counts=counts)


# ---------------------------------------------------------------------------------------------
# Drift: discounting evidence from older checkpoints
# ---------------------------------------------------------------------------------------------


class CheckpointEvidence(NamedTuple):
    """Rollouts of one task under one policy checkpoint; ``checkpoint`` orders checkpoints."""

    checkpoint: int
    attempts: int
    passes: int


def _discounted_counts(
    history: Sequence[tuple[int, int, int]], discount: float
) -> tuple[float, float, int, int, int]:
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must lie in (0, 1]; got {discount}")
    records = [CheckpointEvidence(*record) for record in history]
    for record in records:
        _check_integer_counts(record.passes, record.attempts)
    if not records:
        return 0.0, 0.0, 0, 0, 0
    latest = max(record.checkpoint for record in records)
    effective_attempts = effective_passes = 0.0
    for record in records:
        weight = discount ** (latest - record.checkpoint)
        effective_attempts += weight * record.attempts
        effective_passes += weight * record.passes
    latest_attempts = sum(record.attempts for record in records if record.checkpoint == latest)
    total_attempts = sum(record.attempts for record in records)
    total_passes = sum(record.passes for record in records)
    return effective_passes, effective_attempts, latest_attempts, total_attempts, total_passes


def discounted_posterior(
    *,
    history: Sequence[tuple[int, int, int]],
    discount: float = 0.5,
    prior: Sequence[float] = JEFFREYS_PRIOR,
) -> Beta:
    """Posterior of the pass rate under the latest checkpoint, down-weighting older evidence.

    ``history`` holds (checkpoint, attempts, passes) records. Evidence from a checkpoint k steps
    older than the latest counts ``discount ** k`` times (k in units of ``checkpoint``; number
    checkpoints 0, 1, 2, ... to discount per checkpoint). With discount 0.5 the evidence of two
    checkpoints ago counts a quarter, so the estimate follows an improving policy; discount 1
    pools everything.
    """
    effective_passes, effective_attempts, *_ = _discounted_counts(history, discount)
    return posterior(successes=effective_passes, attempts=effective_attempts, prior=prior)


def assess_discounted(
    *,
    history: Sequence[tuple[int, int, int]],
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    discount: float = 0.5,
    group_size: int = 8,
    interval_level: float = 0.95,
) -> Assessment:
    """``assess`` on discounted evidence: the band of a task under the latest checkpoint.

    ``attempts``/``successes`` in the result are raw totals; the decision uses the discounted
    effective counts. The cap (adaptive) or fixed_n (fixed) applies to the latest checkpoint's
    own attempts, so a new checkpoint can always be probed again.
    """
    effective_passes, effective_attempts, latest_attempts, total_attempts, total_passes = _discounted_counts(
        history, discount
    )
    return _assessment(
        attempts=total_attempts,
        successes=total_passes,
        effective_attempts=effective_attempts,
        effective_successes=effective_passes,
        attempts_toward_cap=latest_attempts,
        thresholds=thresholds,
        policy=policy,
        prior=_check_prior(prior),
        group_size=group_size,
        interval_level=interval_level,
    )
