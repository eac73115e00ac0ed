"""Drift: discounting evidence from older policy checkpoints (trainer feedback)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from engine.stats.bands import Thresholds
from engine.stats.posterior import (
    JEFFREYS_PRIOR,
    Beta,
    _check_integer_counts,
    _check_prior,
    posterior,
)
from engine.stats.rule import Assessment, SamplingPolicy, _assessment

__all__ = ["CheckpointEvidence", "assess_discounted", "discounted_posterior"]


class CheckpointEvidence(NamedTuple):
    """Rollouts of one task under one policy checkpoint; ``checkpoint`` orders checkpoints."""

    checkpoint: int
    attempts: int
    passes: int


def _discounted_counts(history: Sequence[tuple[int, int, int]], discount: float) -> tuple[float, float, int, int, int]:
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
