"""Secrets for outside services: only from a variable the operator declared for that purpose in
PASSBAND_OUTBOUND_SECRETS, and only to the origins the declaration binds it to. A registration that
names any other variable (SECRET_KEY, DATABASE_URL...) or points a declared one elsewhere is
refused; the value is read from the environment when the request is made, never stored."""

from __future__ import annotations

import os

from engine.outbound.policy import OutboundPolicy, OutboundRefused, current_policy, origin


def secret_problem(variable: str, *, url: str, policy: OutboundPolicy | None = None) -> str:
    """Why the value of `variable` may not be sent to `url` ("" when it may)."""
    policy = policy or current_policy()
    origins = policy.secrets.get(variable)
    if origins is None:
        declared = ", ".join(sorted(policy.secrets)) or "none are declared"
        return (
            f"{variable!r} is not a declared outbound secret (PASSBAND_OUTBOUND_SECRETS: {declared}); "
            "an operator declares a variable and the origins it may be sent to"
        )
    if origin(url) not in origins:
        return f"{variable} may be sent only to {', '.join(origins)}, not to {origin(url)}"
    return ""


def secret_for(variable: str, *, url: str, policy: OutboundPolicy | None = None) -> str:
    """The value of the declared `variable`, for a request to `url`. Raises OutboundRefused when the
    declaration does not allow it or the variable is empty."""
    if problem := secret_problem(variable, url=url, policy=policy):
        raise OutboundRefused(problem, reason="secret")
    value = os.environ.get(variable, "")
    if not value:
        raise OutboundRefused(f"the declared secret variable {variable} is empty or unset", reason="secret")
    return value


def bearer_headers(variable: str, *, url: str, policy: OutboundPolicy | None = None) -> dict[str, str]:
    """{"Authorization": "Bearer <value>"} for `url`, {} when `variable` is empty. Raises OutboundRefused."""
    if not variable:
        return {}
    return {"Authorization": f"Bearer {secret_for(variable, url=url, policy=policy)}"}
