"""A task version as a world provider sees it (engine/worlds), and what the host lends a provider for a remote
server: its client configuration, its session cap, and the check that a session's tools are the accepted ones.

The world itself comes from whichever registered provider claims the task (engine/worlds/registry.py); how
its failures count is engine/worlds/provider.py.
"""

from __future__ import annotations

from django.conf import settings

from curation import mcp_servers
from curation.models import McpServer, TaskVersion
from curation.server_schemas import server_tools_changed_record
from engine.episodes.remote_mcp import RemoteUnavailable
from engine.episodes.schema_drift import tool_schema_changes
from engine.worlds.provider import RemoteServer, WorldOptions, WorldProvider, WorldTask
from engine.worlds.registry import provider_for


def world_task(version: TaskVersion) -> WorldTask:
    """What a world provider sees of `version` (its environment's remote server lent as a RemoteServer)."""
    server = version.task.environment.remote_server
    return WorldTask(
        prompt=version.prompt,
        tools=version.tools or [],
        verifier=version.verifier or {},
        server=remote_server(server) if server is not None else None,
    )


def world_provider(version: TaskVersion) -> WorldProvider | None:
    """The provider that gives `version` its world; None for a task that is not an episode."""
    return provider_for(world_task(version))


def world_options(*, tool_seconds: float) -> WorldOptions:
    """How this worker runs worlds: `tool_seconds` per call, PASSBAND_WORLD_RESET_TRIES tries to reset."""
    return WorldOptions(
        tool_seconds=tool_seconds, reset_tries=max(1, int(getattr(settings, "PASSBAND_WORLD_RESET_TRIES", 3)))
    )


def remote_server(server: McpServer) -> RemoteServer:
    """`server` as a provider gets it: how to reach it, a session slot within its cap, its tools guard."""
    return RemoteServer(
        name=server.name,
        protocol=server.protocol,
        client_config=lambda: mcp_servers.client_config(server),
        session_slot=lambda: mcp_servers.session_slot(server, wait_s=server.timeout_s),
        tools_guard=lambda offered, allowed: remote_tools_guard(server=server, offered=offered, allowed=allowed),
    )


def remote_tools_guard(*, server: McpServer, offered: list, allowed: tuple[str, ...] = ()) -> None:
    """Raise RemoteUnavailable (reason "schema_changed") when a session of `server` offers tools other than
    the accepted ones (recorded on the server for its page and the campaign page); else nothing."""
    changes = tool_schema_changes(accepted=server.tools or [], offered=offered, allowed=allowed)
    if changes:
        # The job read the server before staff may have accepted the new tools: compare with what is accepted now.
        fresh = McpServer.objects.only("tools", "tools_accepted_at").get(pk=server.pk)
        changes = tool_schema_changes(accepted=fresh.tools or [], offered=offered, allowed=allowed)
    if changes:
        message = server_tools_changed_record(server=fresh, changes=changes)
        raise RemoteUnavailable(message, reason="schema_changed")
