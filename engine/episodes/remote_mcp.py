"""MCP tool servers as episode worlds, through the official `mcp` SDK (no Django here).

    config = McpServerConfig(name="kv", url="http://kv:8000/mcp", timeout_s=10)
    with McpWorld(config=config, reward_arguments={"key": "answer", "expect": "42"}) as world:
        episode = run_episode(backend=backend, messages=prompt, tools=world.tool_schemas, world=world, ...)

One MCP session per rollout: `McpWorld` opens it on entry (streamable HTTP by URL, or a stdio
command that the operator put in settings), lists the server's tools and converts each
`inputSchema` into an OpenAI function schema (`openai_tool_schemas`, which refuses an invalid
schema by tool name), and closes it on exit whatever happened. The SDK is async and episodes are
not: each world runs its session in its own event loop, on an anyio blocking portal (one thread
per open world), and `call` waits for one request at a time.

Outcomes. A tool's own error (`isError`) is a `tool_error` observation the model sees; a call the
server refuses as invalid parameters is `bad_arguments`; an unknown or hidden tool is
`unknown_tool`. Anything else — the server cannot be reached, a request times out, the server
answers a protocol error, the connection drops — raises `McpUnavailable`: an infrastructure
outcome that the caller must not store as an attempt (calibration asks for the rollout again).

The environment's reward (docs/environments.md, "MCP servers"): the server's `reward_tool`
(default `grade`) is hidden from the model; after the episode, `state()` calls it once with the
task's reward arguments and reads a number in [0, 1] from its result (structured `{"reward": x}`,
or text that is a number or JSON with "reward"). The final state is
`{"environment_reward": [{"tool", "reward", "detail"}]}` (empty when the server has no such tool).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import outbound
from engine.episodes.world import ToolResult

DEFAULT_REWARD_TOOL = "grade"
# OpenAI's rule for function names; a server's tool named otherwise cannot be offered to the model.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class RemoteUnavailable(Exception):
    """A remote environment server (MCP or OpenEnv) failed the rollout (unreachable, timeout, protocol
    error, disconnect): an infrastructure outcome, never the model's wrong answer. `reason`:
    unreachable, timeout, server_error, disconnected, busy (every session of the cap in use),
    bad_schema or refused (the outbound policy refused the address or the secret)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class RemoteSchemaError(ValueError):
    """A tool of the server cannot be offered to a model; the message names the tool and the field."""


# The names the MCP path has always used.
McpUnavailable = RemoteUnavailable
McpSchemaError = RemoteSchemaError


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach one MCP server. `url` (streamable HTTP) or `command` (stdio, from settings only);
    `headers` are sent on every HTTP request (resolved from settings by the caller, never stored in
    a task); `timeout_s` bounds connecting and each request; `reward_tool` is hidden from the model."""

    name: str
    url: str = ""
    command: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    reward_tool: str = DEFAULT_REWARD_TOOL


def openai_tool_schema(tool: Any) -> dict[str, Any]:
    """One MCP tool (an SDK `Tool`, or its JSON with `inputSchema`) as an OpenAI function schema.
    Raises McpSchemaError naming the tool when its name or inputSchema cannot be used."""
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    if isinstance(tool, Mapping):
        name, description, schema = tool.get("name"), tool.get("description"), tool.get("inputSchema")
    else:
        name, description, schema = tool.name, tool.description, tool.input_schema
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise McpSchemaError(f"tool {name!r}: a name must be 1-64 letters, digits, '_' or '-' to be offered to a model")
    if not isinstance(schema, Mapping):
        raise McpSchemaError(f"tool {name}: inputSchema must be a JSON object, got {type(schema).__name__}")
    if schema.get("type", "object") != "object":
        raise McpSchemaError(f"tool {name}: inputSchema.type must be 'object', got {schema.get('type')!r}")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as error:
        where = "/".join(str(part) for part in error.path) or "(top)"
        raise McpSchemaError(
            f"tool {name}: inputSchema is not a valid JSON Schema at {where}: {error.message}"
        ) from None
    parameters = json.loads(json.dumps(dict(schema)))
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description:
        function["description"] = str(description)
    return {"type": "function", "function": function}


def openai_tool_schemas(tools: list[Any], *, hidden: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every tool but the `hidden` ones as OpenAI function schemas (see openai_tool_schema)."""
    return [openai_tool_schema(tool) for tool in tools if _tool_name(tool) not in hidden]


def _tool_name(tool: Any) -> Any:
    return tool.get("name") if isinstance(tool, Mapping) else tool.name


def reward_value(result: Any) -> tuple[float | None, str]:
    """The reward in a reward tool's result (structured `{"reward": x}`, or text holding a number or
    JSON with "reward"), and its detail; (None, why) when there is none in [0, 1]."""
    text = _content_text(result)
    if getattr(result, "is_error", False):
        return None, f"the reward tool failed: {text[:300]}"
    candidates: list[Any] = []
    structured = getattr(result, "structured_content", None)
    if isinstance(structured, Mapping):
        candidates.append(structured)
    with contextlib.suppress(ValueError):
        candidates.append(json.loads(text))
    detail = ""
    for candidate in candidates:
        if isinstance(candidate, Mapping) and "result" in candidate and "reward" not in candidate:
            candidate = candidate["result"]
        if isinstance(candidate, Mapping):
            detail = str(candidate.get("detail", ""))[:500]
            candidate = candidate.get("reward")
        if isinstance(candidate, bool):
            candidate = float(candidate)
        if isinstance(candidate, (int, float)) and math.isfinite(candidate):
            if 0.0 <= candidate <= 1.0:
                return float(candidate), detail
            return None, f"the reward tool gave {candidate}, outside [0, 1]"
    return None, f"the reward tool's result holds no reward: {text[:300]!r}"


def _content_text(result: Any) -> str:
    """The text of a CallToolResult: its text blocks joined; other blocks as their JSON."""
    parts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else block.model_dump_json(exclude_none=True))
    return "\n".join(parts)


class McpWorld:
    """One MCP session as an episode's world (the `World` protocol: call, state); a context manager.

    On entry the session is opened and the tools listed: `tool_schemas` holds the ones the model
    may call (the reward tool left out; `allowed`, when given, keeps only those names). Raises
    McpUnavailable when the server cannot be had, McpSchemaError for a tool it cannot offer."""

    def __init__(
        self,
        *,
        config: McpServerConfig,
        reward_arguments: Mapping[str, Any] | None = None,
        allowed: tuple[str, ...] = (),
        seed: int = 0,
    ) -> None:
        self.config = config
        self.environment = f"mcp:{config.name}"
        self.seed = seed
        self.reward_arguments = dict(reward_arguments or {})
        self.allowed = allowed
        self.tool_schemas: list[dict[str, Any]] = []
        # Messages that follow the task's prompt: none (an MCP session has no first observation).
        self.opening_messages: list[dict[str, Any]] = []
        self.server_tools: list[str] = []
        # How long opening the session and listing its tools took (ms): the environment's reset latency.
        self.reset_ms: float | None = None
        self._stack = contextlib.ExitStack()
        self._portal: Any = None
        self._session: Any = None

    # -- the session -----------------------------------------------------------------------------------

    def __enter__(self) -> McpWorld:
        from anyio.from_thread import start_blocking_portal

        started = time.perf_counter()
        try:
            self._portal = self._stack.enter_context(start_blocking_portal())
            self._session = self._stack.enter_context(self._portal.wrap_async_context_manager(self._open()))
            listed = self._portal.call(self._list_tools)
        except BaseException as error:
            self._close_quietly()
            if isinstance(error, (McpUnavailable, KeyboardInterrupt, SystemExit)):
                raise
            raise self._unavailable(error, doing="opening a session") from None
        self.reset_ms = round((time.perf_counter() - started) * 1000, 3)
        self.server_tools = [tool.name for tool in listed]
        visible = [tool for tool in listed if not self.allowed or tool.name in self.allowed]
        try:
            self.tool_schemas = openai_tool_schemas(visible, hidden=(self.config.reward_tool,))
        except McpSchemaError:
            self._close_quietly()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._close_quietly()

    def close(self) -> None:
        self._close_quietly()

    def _close_quietly(self) -> None:
        # A session whose server died cannot say goodbye; closing must not turn into a second failure.
        try:
            self._stack.close()
        except BaseException:  # noqa: BLE001 - whatever the dead transport raises on the way out
            pass
        self._stack = contextlib.ExitStack()
        self._session = None

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        import anyio
        from mcp import ClientSession

        config = self.config
        async with contextlib.AsyncExitStack() as stack:
            # The transports start task groups: a cancel scope may not span entering them, so the
            # connection is bounded by the HTTP client's timeouts and the handshake by fail_after.
            if config.command:
                from mcp import StdioServerParameters, stdio_client

                parameters = StdioServerParameters(
                    command=config.command[0], args=list(config.command[1:]), env=dict(config.env or {}) or None
                )
                read, write = await stack.enter_async_context(stdio_client(parameters))
            else:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                # Through the outbound policy: checked addresses only, no redirects (the SDK's own client follows them).
                client = outbound.mcp_http_client(
                    headers=dict(config.headers), timeout=httpx2.Timeout(config.timeout_s)
                )
                await stack.enter_async_context(client)
                read, write = await stack.enter_async_context(streamable_http_client(config.url, http_client=client))
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(config.timeout_s):
                await session.initialize()
            yield session

    async def _list_tools(self) -> list[Any]:
        import anyio

        tools: list[Any] = []
        cursor = None
        with anyio.fail_after(self.config.timeout_s):
            while True:
                from mcp import types

                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await self._session.list_tools(params=params)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        import anyio

        with anyio.fail_after(self.config.timeout_s):
            return await self._session.call_tool(name, arguments)

    def _unavailable(self, error: BaseException, *, doing: str) -> McpUnavailable:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        leaves = _leaf_errors(error)
        codes = {leaf.code for leaf in leaves if isinstance(leaf, MCPError)}
        if any(isinstance(leaf, outbound.OutboundRefused) for leaf in leaves):
            reason = "refused"
        elif any(isinstance(leaf, TimeoutError) for leaf in leaves) or REQUEST_TIMEOUT in codes:
            reason = "timeout"
        elif CONNECTION_CLOSED in codes:
            reason = "disconnected"
        elif codes:
            reason = "server_error"
        elif self._session is None:
            reason = "unreachable"
        else:
            reason = "disconnected"
        described = "; ".join(f"{type(leaf).__name__}: {leaf}"[:200] for leaf in leaves[:3]) or type(error).__name__
        where = self.config.url or " ".join(self.config.command[:1])
        return McpUnavailable(f"MCP server {self.config.name} ({where}) failed {doing}: {described}", reason=reason)

    # -- the World protocol ----------------------------------------------------------------------------

    def call(self, name: str, arguments: Any) -> ToolResult:
        """One tool call; see the module docstring for the outcomes. Raises McpUnavailable."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        started = time.perf_counter()

        def elapsed() -> float:
            return (time.perf_counter() - started) * 1000

        offered = {schema["function"]["name"] for schema in self.tool_schemas}
        if name not in offered:
            known = ", ".join(sorted(offered))
            return ToolResult(
                "unknown_tool", json.dumps({"error": f"unknown tool {name!r}; the tools are {known}"}), 0.0
            )
        if self._session is None:
            raise McpUnavailable(f"MCP server {self.config.name}: the session is closed", reason="disconnected")
        try:
            result = self._portal.call(self._call_tool, name, dict(arguments or {}))
        except MCPError as error:
            if error.code == INVALID_PARAMS:
                return ToolResult("bad_arguments", json.dumps({"error": error.message[:500]}), elapsed())
            raise self._unavailable(error, doing=f"calling {name}") from None
        except Exception as error:  # noqa: BLE001 - every transport failure is the server's, not the model's
            raise self._unavailable(error, doing=f"calling {name}") from None
        status = "tool_error" if result.is_error else "ok"
        return ToolResult(status, _content_text(result), elapsed())

    def state(self) -> dict[str, list[dict[str, Any]]]:
        """The environment's reward, read from the reward tool (empty when the server has none).
        Raises McpUnavailable when the server fails the call."""
        tool = self.config.reward_tool
        if not tool or tool not in self.server_tools:
            return {}
        if self._session is None:
            raise McpUnavailable(f"MCP server {self.config.name}: the session is closed", reason="disconnected")
        try:
            result = self._portal.call(self._call_tool, tool, self.reward_arguments)
        except Exception as error:  # noqa: BLE001 - as in call()
            raise self._unavailable(error, doing=f"calling its reward tool {tool}") from None
        reward, detail = reward_value(result)
        return {"environment_reward": [{"tool": tool, "reward": reward, "detail": detail}]}


def _leaf_errors(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaf_errors(inner)]
    return [error]


def server_tools(config: McpServerConfig) -> list[dict[str, Any]]:
    """Open a session, list the tools and close it: what a registration check shows. Each tool as
    {"name", "description", "hidden"} (the reward tool is hidden from models). Raises
    McpUnavailable (the server cannot be had) or McpSchemaError (a tool's inputSchema is invalid)."""
    with McpWorld(config=config) as world:
        offered = {schema["function"]["name"]: schema["function"] for schema in world.tool_schemas}
        return [
            {
                "name": name,
                "description": offered.get(name, {}).get("description", ""),
                "hidden": name not in offered,
                "parameters": offered.get(name, {}).get("parameters"),
            }
            for name in world.server_tools
        ]


def parse_stdio_servers(text: str) -> dict[str, dict[str, Any]]:
    """The stdio servers an operator allows (``PASSBAND_MCP_STDIO_SERVERS``): JSON
    ``{"name": {"command": ["python", "-m", "tools"], "env": {"VAR": "value"}}}``; empty text: none.
    A stdio server runs a command on the worker, so only settings may name one, never a task or a
    page. Raises ValueError naming the server and field."""
    if not text or not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise ValueError(f"PASSBAND_MCP_STDIO_SERVERS is not JSON: {error}") from None
    if not isinstance(raw, Mapping):
        raise ValueError('PASSBAND_MCP_STDIO_SERVERS must be a JSON object {"name": {"command": [...]}}')
    servers: dict[str, dict[str, Any]] = {}
    for name, entry in raw.items():
        if not isinstance(entry, Mapping) or set(entry) - {"command", "env"}:
            raise ValueError(f"MCP stdio server {name}: must be an object with command (and env)")
        command, env = entry.get("command"), entry.get("env", {})
        if not isinstance(command, list) or not command or not all(isinstance(part, str) and part for part in command):
            raise ValueError(f"MCP stdio server {name}: command must be a non-empty list of strings")
        if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"MCP stdio server {name}: env must be an object of strings")
        servers[str(name)] = {"command": list(command), "env": dict(env)}
    return servers
