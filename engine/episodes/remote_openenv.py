"""OpenEnv environment servers (openenv-core 0.3) as episode worlds (no Django here).

    config = OpenEnvServerConfig(name="echo", url="http://echo:8000", timeout_s=10)
    with OpenEnvWorld(config=config, seed=17) as world:
        episode = run_episode(backend=backend, messages=prompt + world.opening_messages,
                              tools=world.tool_schemas, world=world, ...)

An episode is one WebSocket session on the server's `/ws` (its own environment instance), never
the HTTP `/reset` and `/step`, which build a fresh environment per request. On entry the world
reads the action's JSON Schema from `GET /schema` (at most once a minute per server and process:
`SCHEMA_TTL_S`), connects to `/ws` and resets with the task's
seed (`{"type": "reset", "data": {"seed": s}}`; no seed: the server's own choice). The reset
observation is shown to the model as a user message after the task's prompt (`opening_messages`).

The model acts through one tool, `step`, whose parameters are the action's JSON Schema (less
OpenEnv's own `metadata` field), checked like an MCP inputSchema (`openai_tool_schema`). A call's
arguments are validated against that schema here, then sent as one step; what the model sees is
`{"observation", "reward", "done"}` as JSON. When the environment says `done`, `done` is set and
the episode loop ends the episode; a later call is refused without a step.

`state()` sends `state` and returns the final state: `environment_reward` (the last reward the
environment gave, the reset's included: the shape `episode_reward` reads, as for MCP servers),
`step_rewards` (each step's, for `"aggregate": "sum"`), `done`, and the server's `state` object.

Outcomes. Arguments that fail the schema, here or in the server's validation (`VALIDATION_ERROR`),
are a `bad_arguments` observation the model sees. Anything else — the server cannot be reached, a
request times out, an error message (`EXECUTION_ERROR`, a failed reset...), all sessions in use
(`CAPACITY_REACHED`), the connection drops — raises `RemoteUnavailable`: an infrastructure outcome
that the caller must not store as an attempt.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import outbound
from engine.episodes.remote_mcp import RemoteSchemaError, RemoteUnavailable, openai_tool_schema
from engine.episodes.world import ToolResult

STEP_TOOL = "step"
# A worker reads a server's /schema once a minute at most, not once per rollout (a few ms each):
# (url, headers) -> (read at, the step tool's schema, its arguments' validator).
SCHEMA_TTL_S = 60.0
_schemas: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, dict[str, Any], Any]] = {}
# OpenEnv's base Action declares `metadata` for the framework's own use; the model is not offered it.
_FRAMEWORK_FIELDS = ("metadata",)
_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class OpenEnvServerConfig:
    """How to reach one OpenEnv server: its base `url` (http(s)://host:port, the app's root),
    `headers` sent on the schema request and the WebSocket handshake (resolved from settings by the
    caller, never stored in a task), `timeout_s` for connecting and for each message."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0


def ws_url(url: str) -> str:
    """The server's `/ws` endpoint for its base URL (http -> ws, https -> wss)."""
    base = url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + "/ws"
    return "ws://" + base.removeprefix("http://") + "/ws"


def action_tool_schema(action_schema: Any) -> dict[str, Any]:
    """The action's JSON Schema (from /schema) as the OpenAI function schema of the `step` tool.
    Raises RemoteSchemaError saying what is wrong."""
    if not isinstance(action_schema, Mapping):
        raise RemoteSchemaError(f"tool {STEP_TOOL}: the action schema must be a JSON object")
    parameters = json.loads(json.dumps(dict(action_schema)))
    properties = parameters.get("properties")
    if isinstance(properties, dict):
        for name in _FRAMEWORK_FIELDS:
            properties.pop(name, None)
    if isinstance(parameters.get("required"), list):
        parameters["required"] = [name for name in parameters["required"] if name not in _FRAMEWORK_FIELDS]
    described = str(parameters.pop("description", "") or parameters.get("title") or "the action")
    description = f"Take one step in the environment. {described}"
    return openai_tool_schema({"name": STEP_TOOL, "description": description, "inputSchema": parameters})


def _finite(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


class OpenEnvWorld:
    """One `/ws` session of an OpenEnv server as an episode's world (the `World` protocol: call,
    state); a context manager. On entry: the schema, the session, the reset with `seed` (None: no
    seed sent). Raises RemoteUnavailable when the server cannot be had, RemoteSchemaError when its
    action cannot be offered to a model."""

    def __init__(self, *, config: OpenEnvServerConfig, seed: int | None = None, fresh_schema: bool = False) -> None:
        self.config = config
        self.fresh_schema = fresh_schema
        self.environment = f"openenv:{config.name}"
        self.reset_seed = seed
        self.seed = seed if seed is not None else 0  # the transcript's world seed
        self.tool_schemas: list[dict[str, Any]] = []
        self.opening_messages: list[dict[str, Any]] = []
        self.initial: dict[str, Any] = {}
        self.reset_ms: float | None = None
        self.step_rewards: list[float | None] = []
        self.last_reward: float | None = None
        self.done = False
        self._validator: Any = None
        self._socket: Any = None
        self._stack = contextlib.ExitStack()

    # -- the session -----------------------------------------------------------------------------------

    def __enter__(self) -> OpenEnvWorld:
        try:
            tool, self._validator = self._step_tool()
            self.tool_schemas = [tool]
            started = time.perf_counter()
            self._connect()
            data = {"seed": self.reset_seed} if self.reset_seed is not None else {}
            self.initial = self._request({"type": "reset", "data": data}, doing="resetting")
            # Opening the session and resetting: the environment's reset latency (its health on the page).
            self.reset_ms = round((time.perf_counter() - started) * 1000, 3)
        except BaseException:
            self.close()
            raise
        self.last_reward = _finite(self.initial.get("reward"))
        self.done = bool(self.initial.get("done"))
        observation = json.dumps(self.initial.get("observation", {}), ensure_ascii=False)
        self.opening_messages = [{"role": "user", "content": f"The environment's first observation: {observation}"}]
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        socket, self._socket = self._socket, None
        stack, self._stack = self._stack, contextlib.ExitStack()
        # A session whose server died cannot say goodbye; closing must not turn into a second failure.
        try:
            if socket is not None:
                socket.send(json.dumps({"type": "close"}))
        except Exception:  # noqa: BLE001 - whatever the dead connection raises
            pass
        try:
            stack.close()
        except Exception:  # noqa: BLE001
            pass

    def _where(self) -> str:
        return f"OpenEnv server {self.config.name} ({self.config.url})"

    def _step_tool(self) -> tuple[dict[str, Any], Any]:
        """The `step` tool from the server's /schema and its validator (cached for SCHEMA_TTL_S)."""
        from jsonschema.validators import validator_for

        key = (self.config.url, tuple(sorted(self.config.headers.items())))
        cached = _schemas.get(key)
        if cached is not None and not self.fresh_schema and time.monotonic() - cached[0] < SCHEMA_TTL_S:
            return cached[1], cached[2]
        tool = action_tool_schema(self._schema().get("action"))
        parameters = tool["function"]["parameters"]
        validator = validator_for(parameters)(parameters)
        _schemas[key] = (time.monotonic(), tool, validator)
        return tool, validator

    def _schema(self) -> dict[str, Any]:
        import httpx

        url = self.config.url.rstrip("/") + "/schema"
        headers = {"Accept": "application/json", **self.config.headers}
        try:
            # Through the outbound policy: a checked address, no redirect followed.
            with outbound.http_client(timeout_s=self.config.timeout_s, headers=headers) as client:
                response = client.get(url)
                body = json.loads(response.read()[:_MAX_MESSAGE_BYTES]) if response.status_code == 200 else None
        except outbound.OutboundRefused as error:
            raise RemoteUnavailable(f"{self._where()} is refused: {error}", reason="refused") from None
        except (httpx.HTTPError, OSError, ValueError) as error:
            reason = _transport_reason(error)
            raise RemoteUnavailable(f"{self._where()} failed reading /schema: {error}", reason=reason) from None
        if response.status_code != 200:
            what = "a redirect, not followed" if response.is_redirect else f"HTTP {response.status_code}"
            raise RemoteUnavailable(f"{self._where()} failed reading /schema: {what}", reason="server_error")
        if not isinstance(body, Mapping) or not isinstance(body.get("action"), Mapping):
            raise RemoteUnavailable(
                f"{self._where()}: /schema holds no action schema; is this an OpenEnv server?", reason="server_error"
            )
        return dict(body)

    def _connect(self) -> None:
        from urllib.parse import urlsplit

        from websockets.exceptions import InvalidHandshake, InvalidURI
        from websockets.sync.client import connect

        parts = urlsplit(self.config.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            # The socket comes from the outbound policy; websockets follows no redirect on a socket it was given.
            sock = outbound.open_socket(parts.hostname or "", port, timeout=self.config.timeout_s)
            self._socket = self._stack.enter_context(
                connect(
                    ws_url(self.config.url),
                    sock=sock,
                    additional_headers=dict(self.config.headers) or None,
                    open_timeout=self.config.timeout_s,
                    close_timeout=1,
                    max_size=_MAX_MESSAGE_BYTES,
                    compression=None,
                    proxy=None,
                )
            )
        except outbound.OutboundRefused as error:
            raise RemoteUnavailable(f"{self._where()} is refused: {error}", reason="refused") from None
        except (InvalidHandshake, InvalidURI) as error:
            raise RemoteUnavailable(
                f"{self._where()} refused the /ws session: {error}", reason="server_error"
            ) from None
        except (TimeoutError, OSError) as error:
            raise RemoteUnavailable(
                f"{self._where()} failed opening /ws: {type(error).__name__}: {error}",
                reason=_transport_reason(error),
            ) from None

    def _request(self, message: dict[str, Any], *, doing: str) -> dict[str, Any]:
        """Send one message and return the answer's `data`; an `error` answer or a transport failure
        raises RemoteUnavailable (a VALIDATION_ERROR is left to the caller: `_Refused`)."""
        from websockets.exceptions import ConnectionClosed

        if self._socket is None:
            raise RemoteUnavailable(f"{self._where()}: the session is closed", reason="disconnected")
        try:
            with contextlib.suppress(ConnectionClosed):
                # A server that refuses the session (CAPACITY_REACHED...) says why, then closes: the
                # send fails, and the reason still waits to be read below.
                self._socket.send(json.dumps(message))
            raw = self._socket.recv(timeout=self.config.timeout_s)
        except TimeoutError:
            raise RemoteUnavailable(
                f"{self._where()} gave no answer {doing} within {self.config.timeout_s:g} s", reason="timeout"
            ) from None
        except (ConnectionClosed, OSError) as error:
            raise RemoteUnavailable(
                f"{self._where()} dropped the session {doing}: {type(error).__name__}: {error}", reason="disconnected"
            ) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise RemoteUnavailable(f"{self._where()} answered {doing} with non-JSON", reason="server_error") from None
        data = answer.get("data") if isinstance(answer, Mapping) else None
        if not isinstance(data, Mapping):
            raise RemoteUnavailable(f"{self._where()} answered {doing} without data", reason="server_error")
        if answer.get("type") == "error":
            code, text = str(data.get("code", "")), str(data.get("message", ""))[:300]
            if code == "VALIDATION_ERROR":
                raise _Refused(_validation_message(data))
            reason = "busy" if code == "CAPACITY_REACHED" else "server_error"
            raise RemoteUnavailable(f"{self._where()} failed {doing}: {code}: {text}", reason=reason)
        return dict(data)

    # -- the World protocol ----------------------------------------------------------------------------

    def call(self, name: str, arguments: Any) -> ToolResult:
        """One step; see the module docstring for the outcomes. Raises RemoteUnavailable."""
        started = time.perf_counter()

        def elapsed() -> float:
            return (time.perf_counter() - started) * 1000

        if name != STEP_TOOL:
            return ToolResult("unknown_tool", json.dumps({"error": f"unknown tool {name!r}; the tool is step"}), 0.0)
        if self.done:
            return ToolResult(
                "tool_error", json.dumps({"error": "the episode is over (the environment said done)"}), 0.0
            )
        if not isinstance(arguments, Mapping):
            return ToolResult("bad_arguments", json.dumps({"error": "arguments must be a JSON object"}), 0.0)
        action = dict(arguments)
        errors = sorted(self._validator.iter_errors(action), key=str)
        if errors:
            where = "/".join(str(part) for part in errors[0].path) or "(arguments)"
            return ToolResult("bad_arguments", json.dumps({"error": f"{where}: {errors[0].message}"[:500]}), 0.0)
        try:
            data = self._request({"type": "step", "data": action}, doing="stepping")
        except _Refused as refused:
            return ToolResult("bad_arguments", json.dumps({"error": str(refused)}), elapsed())
        reward = _finite(data.get("reward"))
        self.step_rewards.append(reward)
        if reward is not None:
            self.last_reward = reward
        self.done = bool(data.get("done"))
        content = {"observation": data.get("observation", {}), "reward": data.get("reward"), "done": self.done}
        return ToolResult("ok", json.dumps(content, ensure_ascii=False), elapsed())

    def state(self) -> dict[str, Any]:
        """The final state (module docstring). Raises RemoteUnavailable when the server fails it."""
        try:
            server_state = self._request({"type": "state"}, doing="reading the state")
        except _Refused as refused:
            raise RemoteUnavailable(f"{self._where()} refused the state: {refused}", reason="server_error") from None
        detail = "the last reward the environment gave" + ("" if self.step_rewards else " (at reset: no step taken)")
        return {
            "environment_reward": [{"tool": STEP_TOOL, "reward": self.last_reward, "detail": detail}],
            "reset_reward": _finite(self.initial.get("reward")),
            "step_rewards": self.step_rewards,
            "done": self.done,
            "state": server_state,
        }


class _Refused(Exception):
    """The server's VALIDATION_ERROR: the model's arguments, not the server's fault."""


def _validation_message(data: Mapping[str, Any]) -> str:
    problems = []
    for error in data.get("errors") or []:
        if isinstance(error, Mapping):
            where = ".".join(str(part) for part in error.get("loc") or []) or "(arguments)"
            problems.append(f"{where}: {error.get('msg', '')}")
    return ("; ".join(problems) or str(data.get("message", "invalid action")))[:500]


def _transport_reason(error: Any) -> str:
    timed_out = isinstance(error, TimeoutError) or type(error).__name__.endswith("Timeout") or "timed out" in str(error)
    return "timeout" if timed_out else "unreachable"


def server_tools(config: OpenEnvServerConfig) -> list[dict[str, Any]]:
    """Open a session (schema, /ws, a reset), and close it: what a registration check shows, the
    `step` tool as {"name", "description", "hidden", "parameters"}. Raises RemoteUnavailable or
    RemoteSchemaError."""
    with OpenEnvWorld(config=config, fresh_schema=True) as world:
        function = world.tool_schemas[0]["function"]
        return [
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "hidden": False,
                "parameters": function["parameters"],
            }
        ]
