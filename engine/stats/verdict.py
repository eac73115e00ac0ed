"""The whole band rule for one calibration: the stopping rule, the cap, and the flags.

``calibration_verdict`` is the one place that decides what band a stored calibration shows. The
calibration service gives it the counts it aggregated from rollouts and stores what it returns;
trainers and the benchmark can call the very same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.stats.bands import (
    BANDS,
    BORDERLINE,
    TOO_HARD,
    UNDECIDED,
    Band,
    Flag,
    Thresholds,
)
from engine.stats.posterior import JEFFREYS_PRIOR, _check_prior
from engine.stats.rule import Assessment, assess
from engine.stats.sequential import SamplingPolicy
from engine.stats.tables import StoppingTable

__all__ = ["VERIFIER_TROUBLE_SHARE", "Verdict", "calibration_verdict"]

VERIFIER_TROUBLE_SHARE = 0.2


@dataclass(frozen=True)
class Verdict:
    """What a calibration shows.

    * ``band``: too_hard, in_band, retire, undecided or borderline, after every rule below.
    * ``decided``: ``band`` is one of too_hard, in_band, retire.
    * ``flags``: ``Flag`` values, for a person to look at.
    * ``pass_rate``: the observed rate (None with no attempts); ``interval_low``/``interval_high``
      the posterior interval (None with no attempts); ``grpo_signal`` likewise.
    * ``assessment``: the statistics underneath (posterior, band probabilities, next round).
    """

    band: Band
    decided: bool
    flags: tuple[Flag, ...]
    pass_rate: float | None
    interval_low: float | None
    interval_high: float | None
    grpo_signal: float | None
    assessment: Assessment


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {value!r}")


def calibration_verdict(
    *,
    successes: int,
    attempts: int,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    verifier_errors: int = 0,
    generation_errors: int = 0,
    world_errors: int = 0,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    verifier_trouble_share: float = VERIFIER_TROUBLE_SHARE,
    strong_model: bool = False,
    audit_passed: bool = False,
    group_size: int = 8,
    interval_level: float = 0.95,
    table: StoppingTable | None = None,
) -> Verdict:
    """Band, flags and estimate of one task version under one probe model.

     ``successes``/``attempts``: pass verdicts and pass-or-fail verdicts (the evidence).
     ``verifier_errors``: error or timeout verdicts; ``generation_errors``: rollouts that never got
     a completion; ``world_errors``: rollouts whose world failed (it could not reset, a tool ran past its
     time limit). None is evidence, but all were spent, so all count toward the cap.

     The rules, in order:

     1. ``assess`` decides a band, or not (the stopping rule of ``policy``, or an environment's
        learned ``table`` where it applies).
     2. Adaptive policy, still undecided, and attempts + errors of both kinds >= cap: ``borderline``.
     3. ``verifier_trouble`` when more than ``verifier_trouble_share`` of the verdicts (attempts +
        verifier errors) are errors. Failing verdicts from a broken verifier are not evidence that
        the task is hard: a ``too_hard`` or ``borderline`` task is shown ``undecided`` instead.
    3b. ``world_failure`` likewise when more than that share of the rollouts (attempts + verifier and
        world errors) are the world's failures: the task's world, not the model, is what failed.
     4. ``zero_variance`` when every attempt passed, or every one failed.
     5. ``strong_model_fails`` when ``strong_model`` and ``audit_passed`` and the band is
        ``too_hard`` with zero passes: the reference answer passes, yet a strong model never does,
        so the task itself may be wrong. For review, not an automatic action.
    """
    _check_count("verifier_errors", verifier_errors)
    _check_count("generation_errors", generation_errors)
    _check_count("world_errors", world_errors)
    if not 0.0 <= verifier_trouble_share <= 1.0:
        raise ValueError(f"verifier_trouble_share must lie in [0, 1]; got {verifier_trouble_share}")
    assessment = assess(
        successes=successes,
        attempts=attempts,
        thresholds=thresholds,
        policy=policy,
        prior=_check_prior(prior),
        group_size=group_size,
        interval_level=interval_level,
        table=table,
    )
    band = Band(assessment.band)
    spent = attempts + verifier_errors + generation_errors + world_errors
    if band == UNDECIDED and policy.kind == "adaptive" and spent >= policy.cap:
        band = BORDERLINE
    band, flags = _flagged(
        band,
        successes=successes,
        attempts=attempts,
        verifier_errors=verifier_errors,
        world_errors=world_errors,
        verifier_trouble_share=verifier_trouble_share,
        strong_model_fails=strong_model and audit_passed,
    )
    return Verdict(
        band=band,
        decided=band in BANDS,
        flags=tuple(flags),
        pass_rate=assessment.observed_rate,
        interval_low=assessment.interval_low if attempts else None,
        interval_high=assessment.interval_high if attempts else None,
        grpo_signal=assessment.grpo_signal if attempts else None,
        assessment=assessment,
    )


def _flagged(
    band: Band,
    *,
    successes: int,
    attempts: int,
    verifier_errors: int,
    verifier_trouble_share: float,
    strong_model_fails: bool,
    world_errors: int = 0,
) -> tuple[Band, list[Flag]]:
    """Rules 3 to 5 of calibration_verdict: the flags, and the band a verifier in trouble leaves undecided.
    `strong_model_fails`: the probe model is a strong one and the task's audit passed."""
    flags: list[Flag] = []
    verdicts = attempts + verifier_errors
    if verdicts and verifier_errors / verdicts > verifier_trouble_share:
        flags.append(Flag.VERIFIER_TROUBLE)
        if band in (TOO_HARD, BORDERLINE):
            band = UNDECIDED
    rollouts = verdicts + world_errors
    if world_errors and world_errors / rollouts > verifier_trouble_share:
        flags.append(Flag.WORLD_FAILURE)
        if band in (TOO_HARD, BORDERLINE):
            band = UNDECIDED
    if attempts and successes in (0, attempts):
        flags.append(Flag.ZERO_VARIANCE)
    if strong_model_fails and band == TOO_HARD and successes == 0:
        flags.append(Flag.STRONG_MODEL_FAILS)
    return band, flags
