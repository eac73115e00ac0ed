"""Installed world providers run out of process: the proxy the registry hands out for each one.

An installed provider's ``claims``, ``prepare`` and its worlds' tool calls and state are plug-in code acting on
model-written arguments, so none of them runs in a worker or web process. ``claims`` and ``prepare`` are JSON
requests to pooled helper processes (engine/worlds/provider_worker.py) that import the provider's entry point;
each episode's world lives in a helper of its own, opened for the episode (prepare and the episode's world
there) and killed when it ends; the next episode's helper is started ahead as one is taken, so an episode
waits for its world, not for Python and the package to load. Every helper runs under a memory cap, with an
empty environment and helper_loop's lockdown (no processes, network, file writes, ctypes, or reading the
worker's /proc entries); each request has a deadline (a tool call: ``options.tool_seconds``).

Failures keep their meaning (engine/worlds/provider.py): a package the helper cannot import is ``WorldMissing``;
a world that cannot be opened after ``options.reset_tries``, or whose helper dies mid-episode, is
``WorldFailed`` (the world's outcome, never the model's); a tool call past its deadline is a ``timeout``
observation and ends the world; a tool that raises is a ``tool_error`` observation.

A provider that declares a remote protocol (``remote``) runs out of process the same way, its ``list_tools`` in
a pooled helper too. Its helper has no network either: its client's HTTP requests are questions to the host,
whose own code makes them to the registered server alone, with the server's credentials, which never enter
the helper (engine/worlds/remote_relay.py). The host holds the server's session slot for each episode and
checks its tools; a server that could not be reached is ``RemoteUnavailable``, as for Passband's own protocols.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.episodes.remote_mcp import RemoteUnavailable
from engine.episodes.world import ToolResult
from engine.sandbox.worker_pool import HelperProcess, HelperScript, WorkerFailed, WorkerTimeout
from engine.worlds.provider import (
    EpisodeWorld,
    RemoteEndpoint,
    WorldFailed,
    WorldMissing,
    WorldOptions,
    WorldProvider,
    WorldTask,
)
from engine.worlds.remote_relay import HostRelay, endpoint_request, host_relay

WORKER_SCRIPT = Path(__file__).resolve().parent / "provider_worker.py"
WORKER_MEMORY_BYTES = 1 << 30
REQUEST_SECONDS = 10.0  # claims, prepare, the state
OPEN_SECONDS = 20.0  # an episode's helper: start, prepare and open its world
HARD_LIMIT_GRACE_SECONDS = 1.0
CLAIMS_CACHED = 4096


def task_request(task: WorldTask, *, endpoint: RemoteEndpoint | None = None) -> dict[str, Any]:
    """A task as a helper receives it: JSON, the remote server by name and protocol, and in an episode of a
    remote provider the server's URL and seconds per request (``endpoint``; never its headers)."""
    server: dict[str, Any] | None = None
    if task.server is not None:
        server = {"name": task.server.name, "protocol": task.server.protocol}
    if server is not None and endpoint is not None:
        server["endpoint"] = endpoint_request(endpoint)
    raw = {"prompt": task.prompt, "tools": task.tools, "verifier": dict(task.verifier), "server": server}
    return json.loads(json.dumps(raw, default=str))


def options_request(options: WorldOptions) -> dict[str, Any]:
    return {"tool_seconds": options.tool_seconds, "reset_tries": options.reset_tries}


class _Helpers:
    """Requests to the helper processes of one installed provider."""

    def __init__(self, name: str, *, source: str, remote: bool = False) -> None:
        self.name = name
        self.remote = remote
        self.script = HelperScript(WORKER_SCRIPT, memory_bytes=WORKER_MEMORY_BYTES, arguments=(source,))
        self._claims: OrderedDict[str, bool] = OrderedDict()
        self._lock = threading.Lock()
        self._spare: HelperProcess | None = None  # an episode helper started ahead, its package imported
        self._starting = False
        os.register_at_fork(after_in_child=self._forget_spare)

    def episode_helper(self) -> HelperProcess:
        """A helper for one episode: the one started ahead when it is ready, else a new one; either way the
        next is started ahead at once, in the background, so the next episode waits for its world alone.
        Raises WorkerFailed or WorkerTimeout when none can start."""
        with self._lock:
            spare, self._spare = self._spare, None
            start_ahead = not self._starting
            self._starting = True
        if start_ahead:
            threading.Thread(target=self._start_spare, daemon=True).start()
        if spare is not None and spare.process.poll() is None:
            return spare
        if spare is not None:
            spare.kill()
        return self.script.dedicated(startup_seconds=OPEN_SECONDS)

    def _start_spare(self) -> None:
        try:
            spare: HelperProcess | None = self.script.dedicated(startup_seconds=OPEN_SECONDS)
        except (WorkerFailed, WorkerTimeout):
            spare = None  # the episode that needs one starts its own and says why it cannot
        with self._lock:
            previous, self._spare = self._spare, spare
            self._starting = False
        if previous is not None:
            previous.kill()

    def _forget_spare(self) -> None:
        # A forked child (Celery prefork) must not share its parent's helper: it starts its own.
        self._lock = threading.Lock()
        self._spare, self._starting = None, False

    def request(self, op: str, task: WorldTask, **fields: Any) -> dict[str, Any]:
        """One pooled request; raises WorldMissing when no helper can load the provider."""
        request = {"op": op, "task": task_request(task), "timeout_seconds": REQUEST_SECONDS, **fields}
        try:
            return self.script.pool().call(request, timeout=REQUEST_SECONDS + HARD_LIMIT_GRACE_SECONDS)
        except WorkerTimeout:
            return {"timeout": f"provider {self.name} took over {REQUEST_SECONDS:g} s; helper killed"}
        except WorkerFailed as error:
            raise WorldMissing(
                f"provider {self.name} could not be loaded in its helper process: {error}", world=self.name
            ) from None

    def list_tools(self, endpoint: RemoteEndpoint) -> list[dict[str, Any]]:
        """The tools the server at ``endpoint`` offers, as the provider lists them in a pooled helper through
        the host's relay; raises RemoteUnavailable (reason "refused" when the outbound policy refused it)."""
        request = {
            "op": "list_tools",
            "name": endpoint.name,
            "endpoint": endpoint_request(endpoint),
            "timeout_seconds": REQUEST_SECONDS,
        }
        with host_relay(endpoint) as relay:
            try:
                response = self.script.pool().call(
                    request, timeout=REQUEST_SECONDS + HARD_LIMIT_GRACE_SECONDS, host=relay.answer
                )
            except WorkerTimeout:
                raise RemoteUnavailable(
                    f"listing the tools took over {REQUEST_SECONDS:g} s", reason="timeout"
                ) from None
            except WorkerFailed as error:
                raise RemoteUnavailable(
                    f"provider {self.name} could not be loaded: {error}", reason="server_error"
                ) from None
        if isinstance(response.get("tools"), list) and relay.failure is None:
            return response["tools"]
        reason = relay.failure.reason if relay.failure is not None else "server_error"
        detail = response.get("failed") or response.get("unavailable") or response.get("timeout")
        raise RemoteUnavailable(str(detail or relay.failure or response), reason=reason)

    def claims(self, task: WorldTask) -> bool:
        """Whether the provider claims ``task``, asked once per task (cached); a provider that fails to say
        raises (the registry passes it by)."""
        key = json.dumps(task_request(task), sort_keys=True)
        with self._lock:
            if key in self._claims:
                return self._claims[key]
        response = self.request("claims", task)
        if "claims" not in response:
            raise RuntimeError(f"provider {self.name} did not say whether it claims the task: {response}")
        with self._lock:
            self._claims[key] = bool(response["claims"])
            while len(self._claims) > CLAIMS_CACHED:
                self._claims.popitem(last=False)
        return bool(response["claims"])

    def prepare(self, task: WorldTask, options: WorldOptions) -> IsolatedWorlds:
        response = self.request("prepare", task, options=options_request(options))
        if "missing" in response:
            raise WorldMissing(str(response["missing"]), world=str(response.get("world") or self.name))
        if "name" not in response:
            # The provider failed to prepare in a way a retry may not mend: every episode is the world's failure.
            detail = response.get("failed") or response.get("timeout") or response
            return IsolatedWorlds(self, task, options, name=self.name, failure=f"world {self.name}: {detail}")
        return IsolatedWorlds(self, task, options, name=str(response["name"]))


@dataclass
class IsolatedWorlds:
    """A task's worlds from an installed provider: each episode's world in a helper process of its own."""

    helpers: _Helpers
    task: WorldTask
    options: WorldOptions
    name: str
    failure: str = ""

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        with contextlib.ExitStack() as stack:
            if self.failure:
                raise WorldFailed(self.failure)
            relay = self._relay(stack)
            world, opened = self._open(seed, relay)
            stack.callback(world.close)  # first out: the helper ends before the relay and the session slot
            yield EpisodeWorld(
                world=world,
                messages=opened["messages"],
                tools=opened["tools"],
                environment=str(opened["environment"]),
                world_seed=int(opened["world_seed"]),
            )

    def _relay(self, stack: contextlib.ExitStack) -> HostRelay | None:
        """For a remote provider's episode: one of the server's session slots and the host's relay to it, held
        for the episode (raises RemoteUnavailable when the server cannot be had); None for other providers."""
        server = self.task.server
        if server is None or not self.helpers.remote:
            return None
        stack.enter_context(server.session_slot())
        endpoint = server.client_config()
        if not isinstance(endpoint, RemoteEndpoint):
            raise WorldFailed(f"world {self.name}: server {server.name} is not reached through a RemoteEndpoint")
        return stack.enter_context(host_relay(endpoint, tools_guard=server.tools_guard))

    def _open(self, seed: int, relay: HostRelay | None) -> tuple[IsolatedWorld, dict[str, Any]]:
        """The episode's helper with its world open; WorldFailed after the bounded retry (remembered)."""
        tries = max(1, self.options.reset_tries)
        last = ""
        for attempt in range(tries):
            world = IsolatedWorld(
                self.helpers, environment=self.name, seed=seed, tool_seconds=self.options.tool_seconds, relay=relay
            )
            try:
                return world, world.open(self.task, self.options)
            except WorldFailed as failure:
                last = str(failure)
                if attempt + 1 < tries:
                    time.sleep(0.2 * (attempt + 1))
        self.failure = f"world {self.name}: {last} (tried {tries} times)"
        raise WorldFailed(self.failure)


class IsolatedWorld:
    """One episode's world in its helper process (the ``World`` protocol: environment, seed, call, state)."""

    def __init__(
        self, helpers: _Helpers, *, environment: str, seed: int, tool_seconds: float, relay: HostRelay | None = None
    ) -> None:
        self.helpers = helpers
        self.relay = relay
        self.environment = environment
        self.seed = seed
        self.tool_seconds = float(tool_seconds)
        self.reset_ms: float | None = None
        self._process: HelperProcess | None = None
        self._ended = ""  # why the helper is gone, once it is

    def _request(self, request: dict[str, Any], *, seconds: float) -> dict[str, Any]:
        """One request to the episode's helper, its questions answered by the relay; raises WorkerTimeout or
        WorkerFailed (the helper is then gone), or RemoteUnavailable when the server could not be had."""
        if self._process is None:
            raise WorkerFailed(self._ended or "the world's helper is not running")
        relay = self.relay
        try:
            response = self._process.exchange(
                {**request, "timeout_seconds": seconds},
                deadline=time.monotonic() + seconds + HARD_LIMIT_GRACE_SECONDS,
                host=relay.answer if relay is not None else None,
            )
        except (WorkerTimeout, WorkerFailed) as error:
            self._ended = str(error) or "it did not answer in time"
            self.close()
            raise
        # The server's failure is the infrastructure's, even when the provider's code swallowed it.
        failure = relay.failure if relay is not None else None
        if failure is None and "unavailable" in response:
            failure = RemoteUnavailable(
                str(response["unavailable"]), reason=str(response.get("reason") or "unreachable")
            )
        if failure is not None:
            self._ended = str(failure)
            self.close()
            raise failure
        return response

    def open(self, task: WorldTask, options: WorldOptions) -> dict[str, Any]:
        """Start the helper and open the episode's world in it; WorldMissing or WorldFailed when it cannot."""
        started = time.perf_counter()
        endpoint = self.relay.endpoint if self.relay is not None else None
        request = {
            "op": "open",
            "task": task_request(task, endpoint=endpoint),
            "options": options_request(options),
            "seed": self.seed,
        }
        try:
            self._process = self.helpers.episode_helper()
            response = self._request(request, seconds=OPEN_SECONDS)
        except WorkerTimeout:
            raise WorldFailed(f"opening the world took over {OPEN_SECONDS:g} s") from None
        except WorkerFailed as error:
            raise WorldFailed(f"the world's helper process failed while opening: {error}") from None
        if "missing" in response:
            self.close()
            raise WorldMissing(str(response["missing"]), world=str(response.get("world") or self.environment))
        if "name" not in response:
            self.close()
            raise WorldFailed(str(response.get("failed") or response.get("timeout") or response))
        self.reset_ms = round((time.perf_counter() - started) * 1000, 3)
        return response

    def call(self, name: str, arguments: Any) -> ToolResult:
        started = time.perf_counter()
        try:
            reply = self._request({"op": "call", "tool": name, "arguments": arguments}, seconds=self.tool_seconds)
        except WorkerTimeout:
            latency_ms = (time.perf_counter() - started) * 1000
            return ToolResult("timeout", json.dumps({"error": "the tool timed out"}), latency_ms)
        except WorkerFailed as error:
            raise WorldFailed(f"world {self.environment}: its helper process died during {name}: {error}") from None
        if "timeout" in reply:
            self._ended = "a tool call timed out"
            self.close()  # a world interrupted mid-call is not trusted again
            latency_ms = (time.perf_counter() - started) * 1000
            return ToolResult("timeout", json.dumps({"error": "the tool timed out"}), latency_ms)
        if not isinstance(reply.get("status"), str) or not isinstance(reply.get("content"), str):
            detail = reply.get("failed") or reply.get("error") or "a malformed reply"
            raise WorldFailed(f"world {self.environment}: tool {name} failed: {detail}")
        latency_ms = (time.perf_counter() - started) * 1000
        return ToolResult(reply["status"], reply["content"], latency_ms)

    def state(self) -> dict[str, Any]:
        """The world's state, read in its helper; RuntimeError when it cannot be read."""
        try:
            reply = self._request({"op": "state"}, seconds=REQUEST_SECONDS)
        except (WorkerTimeout, WorkerFailed) as error:
            raise RuntimeError(f"could not read the world's state: {error or 'no answer in time'}") from None
        if not isinstance(reply.get("state"), dict):
            raise RuntimeError(f"could not read the world's state: {reply.get('failed') or reply}")
        return reply["state"]

    def close(self) -> None:
        """End the helper (safe to call twice): the episode's world ends with it."""
        process, self._process = self._process, None
        if process is not None:
            process.kill()


def isolated(declared: WorldProvider, *, source: str) -> WorldProvider:
    """The provider as the registry hands it out: its declaration (name, examples, description, version,
    remote protocol) as loaded, ``claims`` and ``prepare`` requests to helpers that load it from ``source``,
    its entry point's value (``package.module:OBJECT``)."""
    helpers = _Helpers(declared.name, source=source, remote=declared.remote is not None)
    remote = declared.remote
    if remote is not None and remote.list_tools is not None:
        remote = dataclasses.replace(remote, list_tools=helpers.list_tools)
    return dataclasses.replace(declared, claims=helpers.claims, prepare=helpers.prepare, remote=remote)
