"""Remote environment servers (MCP tool servers, OpenEnv environment servers, and servers of any protocol an
installed world provider declares): registering and checking one (staff), how a worker reaches it, and the cap
on its sessions. One record, one page, one command for all; `protocol` says which, one of the world-provider
registry's remote protocols (engine/worlds/registry.py `remote_protocols`). See docs/environments.md, "MCP
servers", "OpenEnv servers" and "A remote protocol of your own".

The rules of judge endpoints hold: a task never carries a URL, a command or a secret. Staff register
a server by its streamable HTTP URL (held to the outbound policy, engine/outbound: an http(s) address
without credentials in it, never a non-global address unless the operator allows the host), or by the
name of a stdio server that the operator wrote in settings (PASSBAND_MCP_STDIO_SERVERS). A bearer
token is named by a variable the operator declared for the server's origin (`api_key_env`,
PASSBAND_OUTBOUND_SECRETS), read on the worker when a session opens. Whether the server answers and
its tools all have usable inputSchemas is checked by a worker (`mcp_server_check_later`), never
inside a web request; the page shows the answer.

The session cap (`max_sessions`) holds over every worker when the broker is Redis: a sorted set per
server of leases (token -> start time) taken and released by Lua scripts, so a worker that dies
holding one frees it when its lease expires. With the embedded filesystem broker (one machine) it
is a per-process semaphore.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from curation.errors import CurationError
from curation.models import Environment, McpServer, remote_protocol_labels
from curation.services import ENVIRONMENT_NAME
from engine import outbound
from engine.episodes import remote_openenv
from engine.episodes.remote_mcp import (
    DEFAULT_REWARD_TOOL,
    McpSchemaError,
    McpServerConfig,
    McpUnavailable,
    server_tools,
)
from engine.episodes.remote_openenv import OpenEnvServerConfig
from engine.episodes.tool_schemas import tool_schema_problems
from engine.worlds.provider import RemoteEndpoint
from engine.worlds.registry import remote_protocols

logger = logging.getLogger(__name__)

# How long a lease lives without being released: longer than any episode (EpisodeLimits.wall_seconds
# is 300 s by default), so only a worker that died holding it loses it this way.
LEASE_S = 900.0
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])))
  return 1
end
return 0
"""


def mcp_server_register(
    *,
    name: str,
    url: str = "",
    stdio: str = "",
    api_key_env: str = "",
    max_sessions: int = 8,
    timeout_s: float = 30.0,
    reward_tool: str = DEFAULT_REWARD_TOOL,
    protocol: str = McpServer.Protocol.MCP,
    created_by: AbstractBaseUser | None = None,
    check: bool = True,
) -> McpServer:
    """Register a remote server (staff). `protocol` "mcp": exactly one of `url` (streamable HTTP) and
    `stdio` (a name in PASSBAND_MCP_STDIO_SERVERS); "openenv", or a protocol an installed world provider
    declares: `url` (no stdio, no reward tool: the server or its provider gives the rewards). With `check`, the
    server must answer (an MCP session lists usable tools; an OpenEnv /schema gives an offerable action and a
    /ws session resets; another protocol's provider lists its tools) before it is saved. Raises CurationError
    saying which field is wrong and what to do."""
    if not ENVIRONMENT_NAME.match(name or ""):
        raise CurationError(f"name: {name!r} is not valid; use 1-80 letters, digits, '-' or '_'.")
    if McpServer.objects.filter(name=name).exists():
        raise CurationError(f"name: a server named {name!r} already exists.")
    labels = remote_protocol_labels()
    if protocol not in labels:
        raise CurationError(
            f"protocol: must be one of {', '.join(labels)} (the world providers' remote protocols); got {protocol!r}."
        )
    url, stdio = (url or "").strip(), (stdio or "").strip()
    if protocol != McpServer.Protocol.MCP:
        if stdio or not url:
            article = "an" if labels[protocol][:1] in "AEIOU" else "a"
            raise CurationError(
                f"url: {article} {labels[protocol]} is reached by its URL, such as http://env:8000 (no stdio)."
            )
        reward_tool = ""
    if bool(url) == bool(stdio):
        raise CurationError("url: give the server's streamable HTTP URL, or the name of a stdio server in settings.")
    if url and (problem := outbound.url_problem(url)):
        raise CurationError(f"url: {problem}.")
    if stdio and stdio not in settings.PASSBAND_MCP_STDIO_SERVERS:
        known = ", ".join(sorted(settings.PASSBAND_MCP_STDIO_SERVERS)) or "none are configured"
        raise CurationError(
            f"stdio: {stdio!r} is not in PASSBAND_MCP_STDIO_SERVERS ({known}); an operator adds commands there."
        )
    api_key_env = (api_key_env or "").strip()
    if api_key_env and stdio:
        raise CurationError("api key env: a stdio server takes its environment from PASSBAND_MCP_STDIO_SERVERS.")
    if api_key_env and (problem := outbound.secret_problem(api_key_env, url=url)):
        raise CurationError(f"api key env: {problem}.")
    if not 1 <= max_sessions <= 1024:
        raise CurationError(f"max sessions: must lie between 1 and 1024; got {max_sessions}.")
    if not 0 < timeout_s <= 600:
        raise CurationError(f"timeout: must lie between 0 and 600 seconds; got {timeout_s}.")
    server = McpServer(
        name=name,
        url=url,
        stdio=stdio,
        api_key_env=api_key_env,
        max_sessions=max_sessions,
        timeout_s=timeout_s,
        reward_tool=(reward_tool or "").strip(),
        protocol=protocol,
        created_by=created_by,
    )
    if check:
        server.tools = _tools_of(server)
        server.checked_at = timezone.now()
        server.check_status = McpServer.CheckStatus.OK
    server.save()
    return server


def mcp_server_check(*, server: McpServer) -> McpServer:
    """Connect to a registered server and store the tools it lists now (what a worker runs; the
    command runs it in process). Raises CurationError when it cannot be reached, the outbound policy
    refuses it, or a tool's inputSchema is invalid: the stored list is then kept, and the error is
    stored as the check's answer."""
    try:
        tools = _tools_of(server)
    except CurationError as error:
        server.check_status, server.check_error = McpServer.CheckStatus.FAILED, str(error)
        server.save(update_fields=["check_status", "check_error"])
        raise
    server.tools, server.checked_at = tools, timezone.now()
    server.check_status, server.check_error = McpServer.CheckStatus.OK, ""
    server.save(update_fields=["tools", "checked_at", "check_status", "check_error"])
    return server


def mcp_server_check_later(*, server: McpServer) -> McpServer:
    """Mark the server's check pending and queue it for a worker (after the transaction commits):
    a web request never waits on an outside server. The page shows the answer when it comes."""
    from curation import tasks

    server.check_status, server.check_error = McpServer.CheckStatus.PENDING, ""
    server.save(update_fields=["check_status", "check_error"])
    transaction.on_commit(lambda: tasks.check_remote_server.delay(server.pk))
    return server


def _tools_of(server: McpServer) -> list[dict[str, Any]]:
    try:
        config = client_config(server)
    except McpUnavailable as error:
        raise CurationError(f"url: {error}") from None
    # A check waits at most the operator's check timeout, whatever the server's own timeout is.
    config = dataclasses.replace(config, timeout_s=min(config.timeout_s, outbound.current_policy().check_timeout_s))
    try:
        if isinstance(config, RemoteEndpoint):
            return _provider_tools(server, config)
        if isinstance(config, OpenEnvServerConfig):
            return remote_openenv.server_tools(config)
        return server_tools(config)
    except McpSchemaError as error:
        what = "the action's JSON Schema" if server.protocol == McpServer.Protocol.OPENENV else "the tool's inputSchema"
        raise CurationError(f"tools: {error}. Fix {what} on the server, then check again.") from None
    except McpUnavailable as error:
        if error.reason == "refused":
            raise CurationError(f"url: refused by the outbound policy: {error}") from None
        raise CurationError(f"url: the server did not answer: {error}") from None


def _provider_tools(server: McpServer, endpoint: RemoteEndpoint) -> list[dict[str, Any]]:
    """The tools a server of an installed provider's protocol offers now, as its provider lists them (none when
    the provider does not list tools); CurationError naming the field when it cannot."""
    protocol = remote_protocols().get(server.protocol)
    if protocol is None or protocol.list_tools is None:
        return []
    try:
        # An installed provider lists them in its helper, its requests made by this process (engine/worlds/isolated.py).
        tools = protocol.list_tools(endpoint)
    except outbound.OutboundRefused as error:
        raise CurationError(f"url: refused by the outbound policy: {error}") from None
    except McpUnavailable as error:
        if error.reason == "refused":
            raise CurationError(f"url: refused by the outbound policy: {error}") from None
        raise CurationError(f"url: the server did not answer: {error}") from None
    except Exception as error:  # noqa: BLE001 - an installed provider's client: its failure is the check's answer
        raise CurationError(f"url: the server did not answer: {type(error).__name__}: {error}") from None
    problems = tool_schema_problems(tools)
    if problems:
        raise CurationError(f"tools: {'; '.join(problems[:3])}. Fix the server's tools, then check again.")
    functions = [schema["function"] for schema in tools]
    return [
        {"name": f["name"], "description": f.get("description", ""), "hidden": False, "parameters": f.get("parameters")}
        for f in functions
    ]


def environment_use_mcp_server(*, environment: Environment, server: McpServer | None) -> Environment:
    """Make the environment's tool-use episodes run on `server` (None: back to the built-in worlds);
    the environment's kind is the server's protocol."""
    environment.kind = Environment.Kind.BUILTIN if server is None else server.protocol
    environment.mcp_server = server
    environment.save(update_fields=["kind", "mcp_server"])
    return environment


def client_config(server: McpServer) -> McpServerConfig | OpenEnvServerConfig | RemoteEndpoint:
    """How this process reaches `server`: the URL or the settings' stdio command, and the bearer
    token read from the variable the registration names, which the operator must have declared for
    the server's origin (a RemoteEndpoint for a protocol an installed provider declares). Raises
    McpUnavailable (reason "refused") when the declaration does not allow it (an old registration, a
    declaration withdrawn since)."""
    headers = {}
    if server.api_key_env:
        try:
            headers = outbound.bearer_headers(server.api_key_env, url=server.url)
        except outbound.OutboundRefused as error:
            raise McpUnavailable(f"server {server.name}: its API key is refused: {error}", reason="refused") from None
    if server.protocol == McpServer.Protocol.OPENENV:
        return OpenEnvServerConfig(name=server.name, url=server.url, headers=headers, timeout_s=server.timeout_s)
    if server.protocol != McpServer.Protocol.MCP:
        return RemoteEndpoint(name=server.name, url=server.url, headers=headers, timeout_s=server.timeout_s)
    if server.stdio:
        entry = settings.PASSBAND_MCP_STDIO_SERVERS.get(server.stdio)
        if entry is None:
            raise McpUnavailable(
                f"MCP server {server.name}: stdio server {server.stdio!r} is not in this worker's settings",
                reason="unreachable",
            )
        return McpServerConfig(
            name=server.name,
            command=tuple(entry["command"]),
            env=entry.get("env") or None,
            timeout_s=server.timeout_s,
            reward_tool=server.reward_tool,
        )
    return McpServerConfig(
        name=server.name, url=server.url, headers=headers, timeout_s=server.timeout_s, reward_tool=server.reward_tool
    )


# -- the session cap ---------------------------------------------------------------------------------

_local_lock = threading.Lock()
_local_semaphores: dict[str, threading.BoundedSemaphore] = {}


def _redis_client() -> Any:
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    return redis.Redis.from_url(url)


@contextlib.contextmanager
def session_slot(server: McpServer, *, wait_s: float) -> Iterator[None]:
    """Hold one of the server's `max_sessions` slots for the block. Waits up to `wait_s` seconds for
    one; raises McpUnavailable(reason="busy") when none frees up (the rollout is asked for again)."""
    client = _redis_client()
    if client is None:
        with _local_slot(server, wait_s=wait_s):
            yield
        return
    key = f"passband:mcp-sessions:{server.name}"
    token = uuid.uuid4().hex
    acquire = client.register_script(_ACQUIRE)
    deadline = time.monotonic() + wait_s
    pause_s = 0.05
    while not acquire(keys=[key], args=[time.time(), LEASE_S, server.max_sessions, token]):
        if time.monotonic() + pause_s > deadline:
            raise _busy(server, wait_s=wait_s)
        time.sleep(pause_s)
        pause_s = min(2 * pause_s, 1.0)
    try:
        yield
    finally:
        client.zrem(key, token)


@contextlib.contextmanager
def _local_slot(server: McpServer, *, wait_s: float) -> Iterator[None]:
    with _local_lock:
        semaphore = _local_semaphores.setdefault(server.name, threading.BoundedSemaphore(server.max_sessions))
    if not semaphore.acquire(timeout=wait_s):
        raise _busy(server, wait_s=wait_s)
    try:
        yield
    finally:
        semaphore.release()


def _busy(server: McpServer, *, wait_s: float) -> McpUnavailable:
    return McpUnavailable(
        f"server {server.name}: all {server.max_sessions} sessions stayed in use for {wait_s:g} s", reason="busy"
    )


def sessions_in_use(server: McpServer) -> int | None:
    """Slots held now over every worker (Redis), or None where the cap is per process."""
    client = _redis_client()
    if client is None:
        return None
    key = f"passband:mcp-sessions:{server.name}"
    client.zremrangebyscore(key, "-inf", time.time() - LEASE_S)
    return int(client.zcard(key))
