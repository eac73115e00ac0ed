"""A remote server's tool schemas: the ones staff accepted, and a change that rollouts ran into.

`McpServer.tools` holds the tools accepted at registration (or by the last check or acceptance). When a
rollout's session offers different ones (engine/episodes/schema_drift.py), calibration records the change
here and the rollout waits as an infrastructure outcome; the server's page and the campaign page say what
changed until staff accept the new schema (`mcp_server_schema_accept`), which lists the tools again and
stores them as the accepted ones.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from curation.errors import CurationError
from curation.mcp_servers import mcp_server_check
from curation.models import McpServer
from curation.policy import CHANGE, allows


def server_tools_changed_record(*, server: McpServer, changes: list[str]) -> str:
    """Record that a session of `server` offered tools other than the accepted ones; returns the message
    (what changed, and what staff must do), which the rollout's infrastructure error carries too. Nothing is
    recorded when staff accepted tools since `server` was read (its `tools_accepted_at`)."""
    message = (
        f"the tools of server {server.name} changed since they were accepted: {'; '.join(changes)}. "
        "Rollouts wait (nothing is counted) until staff accept the new schema on the MCP servers page."
    )[:2000]
    updated = McpServer.objects.filter(pk=server.pk, tools_accepted_at=server.tools_accepted_at)
    if server.tools_accepted_at is None:
        updated = McpServer.objects.filter(pk=server.pk, tools_accepted_at__isnull=True)
    updated.exclude(tools_changed=message).update(tools_changed=message, tools_changed_at=timezone.now())
    return message


def mcp_server_schema_accept(*, server: McpServer, accepted_by: AbstractBaseUser) -> McpServer:
    """Staff accept the server's tools as it lists them now: they become the accepted schema and the
    recorded change is cleared, so waiting rollouts run again. Raises CurationError (not staff, or the
    server cannot be listed)."""
    if not allows(accepted_by, CHANGE, server):
        raise CurationError("Only staff can accept a server's new tool schema.")
    server = mcp_server_check(server=server)
    server.tools_changed, server.tools_changed_at, server.tools_accepted_at = "", None, timezone.now()
    server.save(update_fields=["tools_changed", "tools_changed_at", "tools_accepted_at"])
    return server


def mcp_server_schema_accept_later(*, server: McpServer, accepted_by: AbstractBaseUser) -> McpServer:
    """Staff ask to accept the server's tools as it lists them now; a worker lists them and stores them
    (`mcp_server_schema_accept`), so a web request never waits on an outside server. Returns the server,
    its check marked pending. Raises CurationError (not staff)."""
    from curation import tasks

    if not allows(accepted_by, CHANGE, server):
        raise CurationError("Only staff can accept a server's new tool schema.")
    server.check_status, server.check_error = McpServer.CheckStatus.PENDING, ""
    server.save(update_fields=["check_status", "check_error"])
    transaction.on_commit(lambda: tasks.accept_remote_server_tools.delay(server.pk, accepted_by.pk))
    return server
