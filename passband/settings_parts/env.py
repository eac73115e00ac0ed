"""Where Passband keeps its files, and how a setting is read from the environment: every reader refuses a
value it cannot read (ImproperlyConfigured naming the variable), so a typo never starts a server."""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("PASSBAND_VAR_DIR", BASE_DIR / "var"))


TRUE_SPELLINGS = ("1", "true", "yes", "on")
FALSE_SPELLINGS = ("0", "false", "no", "off")


def env_bool(name: str, default: bool = False) -> bool:
    """A yes/no setting; unset or empty gives `default`. Any other spelling than the accepted ones
    (in any case) stops the start, so that a typo such as `ture` is never a silent False."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in TRUE_SPELLINGS:
        return True
    if raw in FALSE_SPELLINGS:
        return False
    accepted = ", ".join(TRUE_SPELLINGS + FALSE_SPELLINGS)
    raise ImproperlyConfigured(f"{name} must be a yes/no value ({accepted}), got {os.environ[name]!r}")


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from error


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]
