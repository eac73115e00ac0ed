"""The test environment's outbound settings, and helpers to change the policy inside a test.

Loaded with `-p tests.support.outbound` (pyproject's addopts), before pytest-django reads the settings, so
settings.py and every worker subprocess see it. The suite's own servers (llama-server, the fake OpenAI
servers, the MCP and OpenEnv test servers) listen on 127.0.0.1: the test environment allows that host as
an operator allows a deployment's own services (PASSBAND_OUTBOUND_ALLOW_HOSTS). It allows the host only as
written: 2130706433, localhost or ::ffff:127.0.0.1 stay refused, and the hostile tests use those, or a
policy that allows nothing (`outbound_policy`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

TEST_ALLOWED_HOSTS = "127.0.0.1"

os.environ.setdefault("PASSBAND_OUTBOUND_ALLOW_HOSTS", TEST_ALLOWED_HOSTS)


@contextlib.contextmanager
def outbound_policy(
    *, allowed_hosts: str | None = None, secrets: Mapping[str, list[str]] | None = None, **timeouts: float
) -> Iterator[None]:
    """This process's outbound policy for the block: `allowed_hosts` (None: the test environment's),
    `secrets` ({variable: [origins]}), timeouts; the previous policy afterwards."""
    import json

    from engine import outbound

    previous = outbound.current_policy()
    outbound.configure(
        allowed_hosts=TEST_ALLOWED_HOSTS if allowed_hosts is None else allowed_hosts,
        secrets=json.dumps(dict(secrets or {})),
        **timeouts,
    )
    try:
        yield
    finally:
        outbound.set_policy(previous)
