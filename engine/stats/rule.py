"""``assess``: what calibration knows about one task after some rollouts, and what to do next."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.stats.bands import (
    BANDS,
    BORDERLINE,
    CONTINUE,
    LABELS,
    UNDECIDED,
    Band,
    Thresholds,
    band_for_rate,
)
from engine.stats.posterior import (
    JEFFREYS_PRIOR,
    BandProbabilities,
    Beta,
    _check_group_size,
    _check_integer_counts,
    _check_level,
    _check_prior,
    band_probabilities,
    expected_grpo_signal,
    posterior,
    posterior_interval,
)
from engine.stats.sequential import SamplingPolicy, decision_codes
from engine.stats.tables import StoppingTable

__all__ = ["Assessment", "assess", "evidence_decides"]


@dataclass(frozen=True)
class Assessment:
    """What calibration knows about one task after some rollouts.

    * ``attempts``, ``successes``: the raw evidence (pass and fail outcomes only).
    * ``effective_attempts``, ``effective_successes``: what the posterior used; equal to the raw
      counts except for discounted (drift) evidence.
    * ``pass_rate``: the posterior mean, defined with no attempts and never exactly 0 or 1.
    * ``observed_rate``: effective successes / effective attempts (None with no attempts); a
      fixed policy with ``labels="raw"`` labels by this, as papers do.
    * ``interval_low``, ``interval_high``: two-sided equal-tailed posterior interval at
      ``interval_level`` (the Jeffreys interval under the default prior).
    * ``band``: too_hard, in_band, retire, undecided or borderline.
    * ``band_probabilities``: posterior P(too_hard), P(in_band), P(retire).
    * ``grpo_signal``: posterior expected probability that a group of ``group_size`` is mixed.
    * ``decided``: a band was decided, with the stated confidence (whatever the policy, unless a
      fixed policy asks for raw labels).
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
    band: Band
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
    table: StoppingTable | None = None,
) -> Assessment:
    if not isinstance(thresholds, Thresholds):
        raise TypeError(f"thresholds must be a Thresholds; got {type(thresholds).__name__}")
    if not isinstance(policy, SamplingPolicy):
        raise TypeError(f"policy must be a SamplingPolicy; got {type(policy).__name__}")
    _check_group_size(group_size)
    _check_level(interval_level)
    beta_posterior = posterior(successes=effective_successes, attempts=effective_attempts, prior=prior)
    observed_rate = effective_successes / effective_attempts if effective_attempts > 0 else None

    band, decided, next_round = _band_decision(
        attempts=attempts,
        effective_attempts=effective_attempts,
        effective_successes=effective_successes,
        observed_rate=observed_rate,
        attempts_toward_cap=attempts_toward_cap,
        thresholds=thresholds,
        policy=policy,
        prior=prior,
        table=table,
    )
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


def _band_decision(
    *,
    attempts: int,
    effective_attempts: float,
    effective_successes: float,
    observed_rate: float | None,
    attempts_toward_cap: int,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Beta,
    table: StoppingTable | None = None,
) -> tuple[Band, bool, int]:
    """The policy's rule: (band, decided, rollouts to request next). Either policy claims a band only
    when the interval rule decides it; a fixed one stops at its n (undecided if the interval still
    straddles a threshold, or, with labels "raw", the observed rate's band as papers report it); an
    adaptive one stops when the stopping table decides or at the cap. A learned ``table``
    (``stats.learned_table``) decides an adaptive policy's rounds where the evidence sits on its
    schedule (whole counts, no discounting); off it (errors left a round short) the rule does."""
    code = CONTINUE
    on_schedule = (
        table is not None
        and policy.kind == "adaptive"
        and effective_attempts == attempts
        and attempts in table.attempts
        and float(effective_successes).is_integer()
    )
    if on_schedule:
        assert table is not None
        code = int(table.labels[table.attempts.index(attempts)][int(effective_successes)])
        if code == LABELS.index(BORDERLINE):
            return BORDERLINE, False, 0
    elif attempts > 0:  # the prior alone never decides
        code = int(
            decision_codes(
                successes=np.array([effective_successes]),
                attempts=effective_attempts,
                thresholds=thresholds,
                policy=policy,
                prior=prior,
            )[0]
        )
    if policy.kind == "fixed":
        if attempts_toward_cap < policy.fixed_n or observed_rate is None:
            return UNDECIDED, False, policy.fixed_n - attempts_toward_cap
        if policy.labels == "raw":
            return band_for_rate(pass_rate=observed_rate, thresholds=thresholds), True, 0
        if code != CONTINUE:
            return BANDS[code], True, 0
        return UNDECIDED, False, 0  # N attempts, and the interval still straddles a threshold
    if code != CONTINUE:
        return BANDS[code], True, 0
    if attempts_toward_cap >= policy.cap:
        return BORDERLINE, False, 0
    return UNDECIDED, False, min(policy.round_size, policy.cap - attempts_toward_cap)


def assess(
    *,
    successes: int,
    attempts: int,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    group_size: int = 8,
    interval_level: float = 0.95,
    table: StoppingTable | None = None,
) -> Assessment:
    """Band, estimate and next step for a task with ``successes`` passes in ``attempts`` rollouts.

    Pure, deterministic and cheap: call it after every round, and again on stored evidence when
    an environment's thresholds change. ``prior`` is Jeffreys by default, or a population prior
    (``fit_population_prior``) or ladder prior (``ladder_prior``); it shapes the reported
    posterior, and decides the band only under ``SamplingPolicy(rule="posterior")``. Only pass and fail outcomes
    count as attempts; errors and timeouts are not evidence. ``table``: an environment's learned
    stopping table (``learned_table``), which decides in place of the rule where it applies.
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
        table=table,
    )


def evidence_decides(
    *, band: str, successes: int, attempts: int, thresholds: Thresholds, confidence: float = 0.95
) -> bool:
    """Whether ``successes`` passes in ``attempts`` decide ``band`` under the stopping rule.

    What a release asks of each task it pins: a calibration stored before bands needed the rule
    (or under other thresholds) may claim a band its attempts do not support. False for a band
    that is not one of too_hard, in_band, retire, and for no attempts.
    """
    if band not in BANDS or attempts <= 0:
        return False
    policy = SamplingPolicy(kind="fixed", fixed_n=int(attempts), confidence=confidence)
    return assess(successes=successes, attempts=attempts, thresholds=thresholds, policy=policy).band == band
