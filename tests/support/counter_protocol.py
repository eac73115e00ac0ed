"""A remote protocol Passband does not know, added by a world provider alone (docs/environments.md, "A remote
protocol of your own"): `counter-http`, a JSON-over-HTTP server of counters. Staff register a server of it by
URL like an MCP server; the provider lists its tools for the registration's check and opens one session of the
server per episode, through the endpoint's client (the outbound policy's door).

The server (``serve_counter_http``): ``GET /tools`` gives the OpenAI function schemas, ``POST /sessions`` with
``{"seed"}`` opens a counter starting at the seed, ``POST /sessions/<id>/call`` with ``{"name", "arguments"}``
runs a tool, ``GET /sessions/<id>/state`` gives ``{"value", "reward"}``: 1 when the counter reached 10."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engine.episodes.world import ToolResult
from engine.worlds.provider import (
    EpisodeWorld,
    RemoteEndpoint,
    RemoteProtocol,
    WorldOptions,
    WorldProvider,
    WorldTask,
)

NAME = "counter-http"
TARGET = 10
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "counter_add",
            "description": "Add to the counter.",
            "parameters": {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
        },
    },
    {
        "type": "function",
        "function": {"name": "counter_read", "description": "The counter's value.", "parameters": {"type": "object"}},
    },
]


# -- the provider --------------------------------------------------------------------------------------


def list_tools(endpoint: RemoteEndpoint) -> list[dict[str, Any]]:
    with endpoint.client() as client:
        reply = client.get(endpoint.url.rstrip("/") + "/tools")
        reply.raise_for_status()
        return reply.json()


@dataclass
class CounterSession:
    """One episode's session of the server (the ``World`` protocol)."""

    endpoint: RemoteEndpoint
    seed: int
    environment: str = NAME

    def __post_init__(self) -> None:
        self._client = self.endpoint.client()
        base = self.endpoint.url.rstrip("/")
        reply = self._client.post(base + "/sessions", json={"seed": self.seed})
        reply.raise_for_status()
        self._base = f"{base}/sessions/{reply.json()['id']}"

    def call(self, name: str, arguments: Any) -> ToolResult:
        started = time.perf_counter()
        reply = self._client.post(self._base + "/call", json={"name": name, "arguments": arguments})
        status = "ok" if reply.status_code == 200 else "tool_error"
        return ToolResult(status, reply.text, (time.perf_counter() - started) * 1000)

    def state(self) -> dict[str, Any]:
        state = self._client.get(self._base + "/state").json()
        return {"counter": [state], "environment_reward": [{"reward": state["reward"], "detail": str(state["value"])}]}

    def close(self) -> None:
        self._client.close()


@dataclass
class CounterWorlds:
    """A task's sessions of its server: ``session(endpoint=, seed=, environment=)`` opens one (the ``World``), whose
    tools are ``tools``."""

    task: WorldTask
    name: str = NAME
    tools: list[dict[str, Any]] = field(default_factory=lambda: TOOL_SCHEMAS)
    session: Callable[..., Any] = CounterSession

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        server = self.task.server
        assert server is not None
        world_seed = int(self.task.verifier.get("seed") or 0)
        with server.session_slot():
            world = self.session(endpoint=server.client_config(), seed=world_seed, environment=self.name)
            try:
                server.tools_guard(self.tools, ())
                yield EpisodeWorld(
                    world=world,
                    messages=self.task.prompt,
                    tools=self.tools,
                    environment=self.name,
                    world_seed=world_seed,
                )
            finally:
                world.close()


def claims(task: WorldTask) -> bool:
    return task.server is not None and task.server.protocol == NAME


def prepare(task: WorldTask, options: WorldOptions) -> CounterWorlds:
    return CounterWorlds(task=task)


PROVIDER = WorldProvider(
    name=NAME,
    claims=claims,
    prepare=prepare,
    description="one session of a counter-http server per episode",
    examples_unavailable="a remote world needs a running server; tests/curation/test_remote_protocols.py runs one",
    remote=RemoteProtocol(label="Counter server", list_tools=list_tools),
)


# -- the server ----------------------------------------------------------------------------------------


def _handler(sessions: dict[str, int], seen: list[dict[str, str]]) -> type[BaseHTTPRequestHandler]:
    numbers = itertools.count(1)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            if self.path == "/tools":
                return self._reply(200, TOOL_SCHEMAS)
            session = self.path.removeprefix("/sessions/").removesuffix("/state")
            if session in sessions:
                value = sessions[session]
                return self._reply(200, {"value": value, "reward": 1.0 if value == TARGET else 0.0})
            return self._reply(404, {"error": "no such session"})

        def do_POST(self) -> None:
            seen.append(dict(self.headers))
            body = self._body()
            if self.path == "/sessions":
                session = str(next(numbers))
                sessions[session] = int(body.get("seed") or 0)
                return self._reply(200, {"id": session})
            session = self.path.removeprefix("/sessions/").removesuffix("/call")
            if session not in sessions:
                return self._reply(404, {"error": "no such session"})
            if body.get("name") == "counter_add" and isinstance((body.get("arguments") or {}).get("amount"), int):
                sessions[session] += body["arguments"]["amount"]
            elif body.get("name") != "counter_read":
                return self._reply(400, {"error": f"no tool {body.get('name')!r} with those arguments"})
            return self._reply(200, {"value": sessions[session]})

    return Handler


@contextlib.contextmanager
def serve_counter_http(seen: list[dict[str, str]] | None = None) -> Iterator[str]:
    """A counter-http server on 127.0.0.1 for the block; its URL. ``seen`` gets each request's headers."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler({}, seen if seen is not None else []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
