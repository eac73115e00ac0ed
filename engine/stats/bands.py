"""Bands, flags and thresholds: the vocabulary every other part of calibration speaks.

* ``Band``: ``too_hard`` (p < floor), ``in_band`` (floor <= p < retire_at), ``retire``
  (p >= retire_at); ``undecided`` while evidence is thin; ``borderline`` when the rollout cap is
  reached without a decision. String enums, so ``Band.TOO_HARD == "too_hard"`` and the values
  stored in the database are plain strings.
* ``Flag``: what a calibration wants a person to look at (``calibration_verdict`` sets them).
* indifference zones: around each threshold a range of true pass rates where either neighbouring
  band is an acceptable answer (a task at 2.1% against a 2% floor is not worth 500 rollouts).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "BANDS",
    "BORDERLINE",
    "CONTINUE",
    "IN_BAND",
    "LABELS",
    "RETIRE",
    "TOO_HARD",
    "UNDECIDED",
    "Band",
    "Flag",
    "Thresholds",
    "acceptable_bands",
    "band_for_rate",
    "check_thresholds",
]


class Band(StrEnum):
    TOO_HARD = "too_hard"
    IN_BAND = "in_band"
    RETIRE = "retire"
    UNDECIDED = "undecided"
    BORDERLINE = "borderline"


class Flag(StrEnum):
    VERIFIER_TROUBLE = "verifier_trouble"  # too many verdicts are error or timeout
    ZERO_VARIANCE = "zero_variance"  # every attempt so far passed, or every one failed
    STRONG_MODEL_FAILS = "strong_model_fails"  # a strong model never passes an audited task
    PROMPT_TOO_LONG = "prompt_too_long"  # the prompt does not fit the probe model's context
    WORLD_FAILURE = "world_failure"  # too many rollouts failed in the task's world (reset, tool time limit)
    TAMPERED = "tampered"  # an answer subverted the grading (a verdict of tampered): review the task


TOO_HARD = Band.TOO_HARD
IN_BAND = Band.IN_BAND
RETIRE = Band.RETIRE
UNDECIDED = Band.UNDECIDED
BORDERLINE = Band.BORDERLINE
BANDS: tuple[Band, Band, Band] = (TOO_HARD, IN_BAND, RETIRE)
# Stopping tables store small integer codes: an index into LABELS, or CONTINUE.
LABELS: tuple[Band, Band, Band, Band] = (TOO_HARD, IN_BAND, RETIRE, BORDERLINE)
CONTINUE = -1


def check_thresholds(*, floor: float, retire_at: float) -> None:
    """The one validation of band thresholds: 0 < floor < retire_at < 1, numbers, not NaN.

    Raises ``ValueError`` naming the field; services, forms and commands call this rather than
    repeating the rule.
    """
    for name, value in (("floor", floor), ("retire_at", retire_at)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
            raise ValueError(f"Thresholds.{name} must be a number; got {value!r}")
    if not 0.0 < floor < 1.0:
        raise ValueError(f"Thresholds.floor must lie strictly between 0 and 1; got {floor}")
    if not 0.0 < retire_at < 1.0:
        raise ValueError(f"Thresholds.retire_at must lie strictly between 0 and 1; got {retire_at}")
    if not floor < retire_at:
        raise ValueError(f"Thresholds.retire_at ({retire_at}) must be above floor ({floor})")


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
        check_thresholds(floor=self.floor, retire_at=self.retire_at)
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
    def with_default_zones(cls, *, floor: float, retire_at: float) -> Thresholds:
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


def band_for_rate(*, pass_rate: float, thresholds: Thresholds) -> Band:
    """The band a pass rate falls in: too_hard below floor, retire at or above retire_at."""
    if pass_rate < thresholds.floor:
        return TOO_HARD
    if pass_rate >= thresholds.retire_at:
        return RETIRE
    return IN_BAND


def acceptable_bands(*, pass_rate: float, thresholds: Thresholds) -> frozenset[Band]:
    """Bands that count as right for a task whose true pass rate is ``pass_rate``.

    Outside the zones only the true band; inside a zone either neighbouring band.
    """
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    bands = set()
    if pass_rate < floor_high:
        bands.add(TOO_HARD)
    if floor_low <= pass_rate < retire_high:
        bands.add(IN_BAND)
    if pass_rate >= retire_low:
        bands.add(RETIRE)
    return frozenset(bands)
