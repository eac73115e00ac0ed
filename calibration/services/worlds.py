"""Worlds made ready for a round's episodes: plug-in worlds with a bounded retry, remote sessions whose
tools are still the accepted ones.

A plug-in that cannot reset from a task's seed fails the same way every time (the seed is the task's, not
the rollout's): the round tries `PASSBAND_WORLD_RESET_TRIES` times (a crash or a time-out under load may be
passing), then the failure is the task's outcome for every sample of the round, named for what failed, and
is not asked for again like a model server that is down.
"""

from __future__ import annotations

import time

from django.conf import settings

from curation.models import McpServer
from curation.server_schemas import server_tools_changed_record
from engine.episodes import world as episode_world
from engine.episodes.remote_mcp import RemoteUnavailable
from engine.episodes.schema_drift import tool_schema_changes


def plugin_world_ready(
    *, environment: str, seed: int, tool_seconds: float, failures: dict[tuple[str, int], str]
) -> episode_world.SandboxedWorld | str:
    """A plug-in world of (environment, seed), reset in the sandbox; or, after the bounded retry, what failed
    ("world <name>: ..."). `failures` remembers a world that did not reset, for the rest of the job."""
    key = (environment, seed)
    if key in failures:
        return failures[key]
    tries = max(1, int(getattr(settings, "PASSBAND_WORLD_RESET_TRIES", 3)))
    last = ""
    for attempt in range(tries):
        world = episode_world.SandboxedWorld(environment=environment, seed=seed, tool_seconds=tool_seconds)
        try:
            world.reset()
        except episode_world.WorldResetError as failure:
            last = str(failure)
            if attempt + 1 < tries:
                time.sleep(0.2 * (attempt + 1))
            continue
        return world
    failures[key] = f"world {environment}: {last} (tried {tries} times)"
    return failures[key]


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
