"""The one check of an environment's band thresholds, for forms, services and commands alike.

The rule itself (0 < floor < retire_at < 1, numbers, not NaN) is engine.stats.check_thresholds;
this module turns its verdict into the error a user sees, naming the field that is wrong.
"""

from __future__ import annotations

from curation.errors import CurationError
from engine import stats

FIELDS = ("floor", "retire_at")


class ThresholdError(CurationError):
    """Thresholds refused; `field` is "floor" or "retire_at" (the one to correct)."""

    def __init__(self, message: str, *, field: str):
        super().__init__(message)
        self.field = field


def thresholds_validate(*, floor: object, retire_at: object) -> tuple[float, float]:
    """(floor, retire_at) as floats when 0 < floor < retire_at < 1; ThresholdError naming the field otherwise.

    Numbers given as text ("0.03", from a command line) are read as numbers; anything else that is
    not a real number is refused.
    """
    values = {}
    for name, value in (("floor", floor), ("retire_at", retire_at)):
        try:
            values[name] = float(value) if isinstance(value, str) else value
        except ValueError:
            raise ThresholdError(f"{name}: must be a number; got {value!r}.", field=name) from None
    try:
        stats.check_thresholds(floor=values["floor"], retire_at=values["retire_at"])
    except (TypeError, ValueError) as error:
        message = str(error)
        # engine's messages start "Thresholds.<field> ...": the field to point the user at.
        field = next((name for name in FIELDS if message.startswith(f"Thresholds.{name} ")), "retire_at")
        raise ThresholdError(f"{field}: thresholds need 0 < floor < retire_at < 1; {message}.", field=field) from None
    return float(values["floor"]), float(values["retire_at"])
