"""The sampling policy and the two stopping rules, as arrays of decision codes.

Rules
-----
Both rules look at the evidence after every round of ``round_size`` rollouts and either stop with
a band or ask for another round; at the cap an undecided task is ``borderline``. Each band has an
*acceptable region* of true pass rates, its own range widened by the indifference zones:
``too_hard`` for p < floor_zone high, ``in_band`` for floor_zone low <= p < retire_zone high,
``retire`` for p >= retire_zone low. A band is decided when its region is credible enough; when
two qualify (the evidence sits inside a zone, where both are acceptable) the more probable band
wins. Nothing is decided on zero attempts.

* ``rule="calibrated"`` (the default). The evidence is read through the Jeffreys posterior,
  whatever prior the caller has, and each of the four one-sided claims a label makes (p < floor
  zone high; p >= floor zone low; p < retire zone high; p >= retire zone low) has its own level.
  The levels are chosen by exact computation (``calibrated_levels``) so that, for a task whose
  true pass rate sits exactly at the edge of a zone, the probability of the wrong label that the
  claim guards against is at most ``SamplingPolicy.edge_errors``: 2 * (1 - confidence) at the
  floor zone's edges (10% at the default 0.95) and 1 - confidence at the retire zone's. The
  error falls quickly away from the edges, so it is a promise per task, the same on every
  population, not an average over a prior. The floor side gets the looser share because evidence
  is dear there: proving that a task which never passes is below 4% takes 0.96^n <= error
  rollouts, 56 at 10% and 73 at 5%, on every such task; near the retire zone 20-40 rollouts
  settle a task either way. A population or ladder prior never
  decides a band under this rule: with many tasks that never pass, such a prior turns 32
  failures of a 5% task into "proof" that it is too hard.
* ``rule="posterior"``: the earlier rule. Posterior under the given prior; a band is decided when
  its acceptable region has posterior probability >= ``confidence``. Its guarantee is an average
  over the prior, so it depends on the prior being right.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import scipy  # scipy.stats loads on first use: it costs most of a process's start

from engine.stats.bands import BORDERLINE, CONTINUE, LABELS, Thresholds
from engine.stats.posterior import JEFFREYS_PRIOR, Beta, _cdf, _sf

__all__ = [
    "EDGE_ERROR_PER_DELTA",
    "ClaimLevels",
    "SamplingPolicy",
    "calibrated_levels",
    "decision_codes",
]

# confidence c promises at most these multiples of (1 - c) error at the edge of a zone, per claim
# (order of ClaimLevels: floor zone high, floor zone low, retire zone high, retire zone low).
EDGE_ERROR_PER_DELTA = (2.0, 2.0, 1.0, 1.0)
# Levels are calibrated on at most this many rollouts; beyond it (feedback's unbounded cap) the
# same levels apply.
CALIBRATION_HORIZON = 512


@dataclass(frozen=True)
class SamplingPolicy:
    """How many rollouts to spend on a task.

    ``kind="adaptive"``: rounds of ``round_size`` rollouts (one GRPO group) until the stopping
    rule decides a band, or ``cap`` rollouts are spent (then ``borderline``). ``rule`` picks the
    stopping rule (module docstring); ``confidence`` sets how much evidence it needs.
    ``kind="fixed"``: exactly ``fixed_n`` rollouts, then a band only where the stopping rule's
    claims hold on those ``fixed_n`` attempts (``labels="interval"``, what the app shows: 2 passes
    in 4 straddle the retire line and stay undecided), or the band of the raw pass rate
    (``labels="raw"``, as papers do; the benchmark's baseline). Invalid values raise
    ``ValueError`` naming the field.
    """

    kind: Literal["adaptive", "fixed"] = "adaptive"
    round_size: int = 8
    confidence: float = 0.95
    cap: int = 256
    fixed_n: int = 16
    rule: Literal["calibrated", "posterior"] = "calibrated"
    labels: Literal["interval", "raw"] = "interval"

    def __post_init__(self) -> None:
        if self.kind not in ("adaptive", "fixed"):
            raise ValueError(f"SamplingPolicy.kind must be 'adaptive' or 'fixed'; got {self.kind!r}")
        if self.rule not in ("calibrated", "posterior"):
            raise ValueError(f"SamplingPolicy.rule must be 'calibrated' or 'posterior'; got {self.rule!r}")
        if self.labels not in ("interval", "raw"):
            raise ValueError(f"SamplingPolicy.labels must be 'interval' or 'raw'; got {self.labels!r}")
        for name in ("round_size", "cap", "fixed_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"SamplingPolicy.{name} must be a positive integer; got {value!r}")
        if not isinstance(self.confidence, numbers.Real) or not 0.5 < self.confidence < 1.0:
            raise ValueError(f"SamplingPolicy.confidence must lie strictly between 0.5 and 1; got {self.confidence!r}")
        if self.cap < self.round_size:
            raise ValueError(f"SamplingPolicy.cap ({self.cap}) must be at least round_size ({self.round_size})")

    @property
    def delta(self) -> float:
        """The error the stopping rule tolerates: 1 - confidence."""
        return 1.0 - self.confidence

    @property
    def edge_errors(self) -> tuple[float, float, float, float]:
        """``calibrated`` rule: the most each claim (``ClaimLevels`` order) may be wrong at its edge."""
        first, second, third, fourth = (round(min(0.5, multiple * self.delta), 12) for multiple in EDGE_ERROR_PER_DELTA)
        return first, second, third, fourth


def round_schedule(policy: SamplingPolicy, *, horizon: int | None = None) -> list[int]:
    """Rollouts after each round: round_size, 2 * round_size, ..., cap (or ``horizon``)."""
    if policy.kind == "fixed":
        return [policy.fixed_n]
    cap = policy.cap if horizon is None else min(policy.cap, horizon)
    return list(range(policy.round_size, cap, policy.round_size)) + [cap]


class ClaimLevels(NamedTuple):
    """Jeffreys-posterior level each one-sided claim needs under the ``calibrated`` rule."""

    below_floor_zone: float  # too_hard: P(p < floor_zone high)
    above_floor_zone: float  # in_band: P(p >= floor_zone low)
    below_retire_zone: float  # in_band: P(p < retire_zone high)
    above_retire_zone: float  # retire: P(p >= retire_zone low)


def _claims(successes: np.ndarray, attempts: float, thresholds: Thresholds) -> np.ndarray:
    """Jeffreys posterior probability of each claim, shape (4, len(successes))."""
    alpha = JEFFREYS_PRIOR.alpha + successes
    beta = JEFFREYS_PRIOR.beta + attempts - successes
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    return np.stack(
        [
            _cdf(alpha, beta, floor_high),
            _sf(alpha, beta, floor_low) if floor_low > 0 else np.ones_like(alpha),
            _cdf(alpha, beta, retire_high) if retire_high < 1 else np.ones_like(alpha),
            _sf(alpha, beta, retire_low),
        ]
    )


def _band_scores(alpha, beta, thresholds: Thresholds) -> np.ndarray:
    too_hard = _cdf(alpha, beta, thresholds.floor)
    retire = _sf(alpha, beta, thresholds.retire_at)
    return np.stack([too_hard, 1.0 - too_hard - retire, retire])


def _pick(qualifies: np.ndarray, scores: np.ndarray) -> np.ndarray:
    # Inside a zone two bands can qualify; both are acceptable, take the more probable band.
    codes = np.argmax(np.where(qualifies, scores, -np.inf), axis=0).astype(np.int8)
    return np.where(qualifies.any(axis=0), codes, np.int8(CONTINUE)).astype(np.int8)


def _codes_from_claims(claims: np.ndarray, scores: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    qualifies = np.stack(
        [
            claims[0] >= levels[0],
            (claims[1] >= levels[1]) & (claims[2] >= levels[2]),
            claims[3] >= levels[3],
        ]
    )
    return _pick(qualifies, scores)


def _posterior_codes(successes, attempts, thresholds: Thresholds, prior: Beta, confidence: float) -> np.ndarray:
    alpha = prior.alpha + successes
    beta = prior.beta + attempts - successes
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    acceptable = np.stack(
        [
            _cdf(alpha, beta, floor_high),
            _cdf(alpha, beta, retire_high) - _cdf(alpha, beta, floor_low),
            _sf(alpha, beta, retire_low),
        ]
    )
    return _pick(acceptable >= confidence, _band_scores(alpha, beta, thresholds))


def decision_codes(
    *,
    successes: np.ndarray,
    attempts: float,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Beta = JEFFREYS_PRIOR,
) -> np.ndarray:
    """The adaptive rule for many pass counts at one number of attempts (vectorised).

    Returns, per entry, the index into BANDS of the decided band, or CONTINUE (the cap is not
    applied here). ``assess``, ``stopping_table`` and the benchmark all go through this function.
    Counts may be fractional (discounted evidence).
    """
    successes = np.asarray(successes, dtype=float)
    if policy.rule == "posterior":
        return _posterior_codes(successes, attempts, thresholds, prior, policy.confidence)
    levels = calibrated_levels(thresholds=thresholds, policy=policy)
    alpha = JEFFREYS_PRIOR.alpha + successes
    beta = JEFFREYS_PRIOR.beta + attempts - successes
    return _codes_from_claims(_claims(successes, attempts, thresholds), _band_scores(alpha, beta, thresholds), levels)


def propagate(
    *, schedule: Sequence[int], codes: Sequence[np.ndarray], pass_rates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact label probabilities and mean rollouts of a stopping table, for many true pass rates.

    ``codes[k][s]`` is the code after ``schedule[k]`` rollouts with s passes (the last round must
    not continue). Returns (label_probabilities of shape (len(pass_rates), len(LABELS)),
    expected_attempts of shape (len(pass_rates),)). The pass-count distribution of the tasks
    still sampling is carried round by round (no simulation).
    """
    pass_rates = np.asarray(pass_rates, dtype=float).reshape(-1)
    width = schedule[-1] + 1
    still_sampling = np.zeros((pass_rates.size, width))
    still_sampling[:, 0] = 1.0
    label_mass = np.zeros((pass_rates.size, len(LABELS)))
    expected_attempts = np.zeros(pass_rates.size)
    previous = 0
    round_pmfs: dict[int, np.ndarray] = {}  # most rounds have the same size
    for attempts, round_codes in zip(schedule, codes):
        new = attempts - previous
        if new not in round_pmfs:
            round_pmfs[new] = scipy.stats.binom.pmf(np.arange(new + 1)[None, :], new, pass_rates[:, None])
        pmf = round_pmfs[new]
        reached = still_sampling[:, : previous + 1]
        still_sampling = np.zeros((pass_rates.size, width))
        for passes in range(new + 1):
            still_sampling[:, passes : passes + previous + 1] += reached * pmf[:, passes : passes + 1]
        round_codes = np.asarray(round_codes)
        for code in range(len(LABELS)):
            label_mass[:, code] += still_sampling[:, : attempts + 1][:, round_codes == code].sum(axis=1)
        stopping = np.zeros(width, dtype=bool)
        stopping[: attempts + 1] = round_codes != CONTINUE
        expected_attempts += attempts * still_sampling[:, stopping].sum(axis=1)
        still_sampling[:, stopping] = 0.0
        previous = attempts
    return label_mass, expected_attempts


# Which claim guards which edge: (claim index, the band it would wrongly give, the edge rate).
def _edges(thresholds: Thresholds) -> list[tuple[int, int, float] | None]:
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    just_below = lambda x: math.nextafter(x, 0.0)
    return [
        (0, 0, floor_high),  # a task at floor_zone high called too_hard
        (1, 1, just_below(floor_low)) if floor_low > 0 else None,  # just under floor_zone low, in_band
        (2, 1, retire_high) if retire_high < 1 else None,  # at retire_zone high, in_band
        (3, 2, just_below(retire_low)),  # just under retire_zone low, retire
    ]


@functools.lru_cache(maxsize=256)
def _calibrate(thresholds: Thresholds, round_size: int, cap: int, edge_errors: tuple[float, ...]) -> ClaimLevels:
    policy = SamplingPolicy(round_size=round_size, cap=cap)
    schedule = round_schedule(policy, horizon=CALIBRATION_HORIZON)
    claims, scores = [], []
    for attempts in schedule:
        successes = np.arange(attempts + 1, dtype=float)
        claims.append(_claims(successes, attempts, thresholds))
        scores.append(
            _band_scores(JEFFREYS_PRIOR.alpha + successes, JEFFREYS_PRIOR.beta + attempts - successes, thresholds)
        )

    def wrong_label_probability(levels: list[float], edge: tuple[int, int, float]) -> float:
        codes = [_codes_from_claims(claim, score, levels) for claim, score in zip(claims, scores)]
        codes[-1] = np.where(codes[-1] == CONTINUE, LABELS.index(BORDERLINE), codes[-1])
        label_mass, _ = propagate(schedule=schedule, codes=codes, pass_rates=np.array([edge[2]]))
        return float(label_mass[0, edge[1]])

    # The least evidence each claim may ask for: the lowest level whose wrong label at its edge
    # stays within its edge error. Bisection on log(1 - level). The claims interact a little (a
    # stricter in_band leaves more paths to too_hard), so sweep until every claim holds at once.
    levels = [0.5, 0.5, 0.5, 0.5]
    edges = _edges(thresholds)
    for _ in range(8):
        for claim, edge in enumerate(edges):
            if edge is None:
                continue
            low, high = math.log(0.5), math.log(1e-9)  # log(1 - level): high means strict
            trial = list(levels)
            for _ in range(16):
                middle = (low + high) / 2.0
                trial[claim] = 1.0 - math.exp(middle)
                if wrong_label_probability(trial, edge) <= edge_errors[claim]:
                    high = middle
                else:
                    low = middle
            levels[claim] = 1.0 - math.exp(high)
        if all(
            edge is None or wrong_label_probability(levels, edge) <= edge_errors[claim]
            for claim, edge in enumerate(edges)
        ):
            break
    return ClaimLevels(*levels)


def calibrated_levels(*, thresholds: Thresholds, policy: SamplingPolicy) -> ClaimLevels:
    """The ``calibrated`` rule's level for each claim, for these thresholds and this policy.

    Computed exactly (bisection on the error at each zone edge, through ``propagate``) and cached
    per process: a fraction of a second the first time, free afterwards.
    """
    return _calibrate(thresholds, int(policy.round_size), int(policy.cap), policy.edge_errors)
