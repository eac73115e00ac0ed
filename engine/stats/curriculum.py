"""The online curriculum: which tasks a trainer should draw next, by predicted learning signal.

GRPO learns from a group of rollouts only when the group is mixed: all passes or all failures
give every rollout the same advantage, and no gradient. So the value of drawing a task for the
next step is the probability that a group of ``group_size`` rollouts is mixed, 1 - p^G - (1 - p)^G,
taken in expectation over what Passband knows about p under the current checkpoint
(``expected_grpo_signal``; for G = 2 it is 2·p·(1 - p)). It is near zero for tasks the policy
never or always solves and largest around p = 1/2; unlike fixed difficulty pools (prime-rl's
easy / normal / hard buffers, filtered by the last reward), it needs no thresholds and keeps a
little weight on tasks whose estimate is uncertain, so a task that starts to be solved is found.

What Passband knows about p under checkpoint k (``checkpoint_posterior``): the trainer's own
reports (the feedback API) for checkpoints up to k, each older checkpoint discounted, and the
probe model's calibration as the oldest evidence of all. The sample is weighted without
replacement (Efraimidis-Spirakis keys u^(1/w)) from a seeded generator over the candidates in a
fixed order, so the same seed and the same evidence give the same tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.stats.bands import Band, Thresholds, band_for_rate
from engine.stats.drift import discounted_posterior
from engine.stats.posterior import Beta, expected_grpo_signal

__all__ = ["CurriculumChoice", "PoolForecast", "checkpoint_posterior", "curriculum_sample", "pool_forecast"]


def checkpoint_posterior(
    *,
    probe: tuple[int, int] | None,
    checkpoints: Sequence[tuple[int, int]],
    discount: float = 0.5,
) -> Beta:
    """Posterior of a task's pass rate under the latest of ``checkpoints``.

    ``probe``: (passes, attempts) of the probe model's calibration, or None. ``checkpoints``: the
    trainer's (passes, attempts) per checkpoint, oldest first. Each checkpoint older than the
    latest counts ``discount`` times less per step; the probe counts as one step older than the
    oldest checkpoint (fully, when there are none).
    """
    history = [] if probe is None else [(0, int(probe[1]), int(probe[0]))]
    history += [(rank + 1, int(attempts), int(passes)) for rank, (passes, attempts) in enumerate(checkpoints)]
    return discounted_posterior(history=history, discount=discount)


@dataclass(frozen=True)
class CurriculumChoice:
    """One candidate's estimate: ``item`` (the caller's id), posterior mean ``pass_rate``, the
    predicted learning ``signal`` (expected probability of a mixed group) and the band of the mean."""

    item: int
    pass_rate: float
    signal: float
    band: Band


def curriculum_sample(
    *,
    candidates: Sequence[tuple[int, Beta]],
    count: int,
    seed: int,
    thresholds: Thresholds,
    group_size: int = 8,
) -> tuple[list[CurriculumChoice], list[CurriculumChoice]]:
    """Draw ``count`` candidates without replacement, each with probability weight its predicted signal.

    ``candidates``: (item id, posterior) pairs; the ids fix the order the generator walks.
    Returns (the drawn choices in draw order, every candidate's estimate in item order). Raises
    ``ValueError`` for a count below 1.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer; got {count!r}")
    ordered = sorted(candidates, key=lambda pair: pair[0])
    estimates = [
        CurriculumChoice(
            item=item,
            pass_rate=posterior.mean,
            signal=expected_grpo_signal(posterior=posterior, group_size=group_size),
            band=band_for_rate(pass_rate=posterior.mean, thresholds=thresholds),
        )
        for item, posterior in ordered
    ]
    if not estimates:
        return [], []
    weights = np.array([max(estimate.signal, 1e-12) for estimate in estimates])
    uniform = np.random.default_rng(seed).random(len(estimates))
    keys = np.log(uniform) / weights  # the largest keys are a weighted sample without replacement
    drawn = np.argsort(-keys, kind="stable")[:count]
    return [estimates[index] for index in drawn], estimates


@dataclass(frozen=True)
class PoolForecast:
    """When the in-band pool runs out at the current rate.

    ``slope``: change in in-band tasks per training step (least squares over the checkpoints
    given); ``empty_at_step``: the step at which the line reaches zero, None when the pool is not
    shrinking or fewer than two checkpoints are known.
    """

    slope: float | None
    empty_at_step: float | None


def pool_forecast(history: Sequence[tuple[int, int]]) -> PoolForecast:
    """Fit a line to (step, in-band tasks) pairs, oldest first, and extrapolate it to zero."""
    if len(history) < 2:
        return PoolForecast(slope=None, empty_at_step=None)
    steps = np.array([step for step, _ in history], dtype=float)
    counts = np.array([count for _, count in history], dtype=float)
    if np.ptp(steps) == 0:
        return PoolForecast(slope=None, empty_at_step=None)
    slope, intercept = np.polyfit(steps, counts, 1)
    if slope >= 0:
        return PoolForecast(slope=float(slope), empty_at_step=None)
    return PoolForecast(slope=float(slope), empty_at_step=float(max(steps[-1], -intercept / slope)))
