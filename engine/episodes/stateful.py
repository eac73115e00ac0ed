"""Stateful plug-ins: a gym-style environment class whose world lives in memory, in one sandboxed process per
episode (docs/environments.md, "A stateful environment").

An entry point of the group `passband.environments` that names a class (``sheet = "my_sheet:SheetWorld"``)
declares one. The class has ``TOOL_SCHEMAS``, ``TABLES``, ``reset(self, seed)``, ``snapshot(self)`` and, per
tool, a method of the tool's name (or one ``step(self, name, arguments)``); optionally ``STATE_CHECKS``,
``DEPENDENCIES``, ``REQUIREMENTS``, ``MEMORY_MB`` and ``RESET_SECONDS``. `plugin_from_class` validates it (the
module contract's checks, through `plugin_runtime.StatefulPlugin`).

`StatefulWorld` is its episode's world: a sandbox session (engine/sandbox/session.py: the isolation and
filesystem view of a tool call's run, the plug-in's packages mounted) running `plugin_runtime.session_main`.
Its process is taken pre-started from a pool when one is ready (engine/episodes/world_pool.py), so an episode
waits for its reset alone; start and reset must finish within ``RESET_SECONDS`` (`WorldResetError` otherwise,
retried by the provider),
its memory is bounded by ``MEMORY_MB``, each call by ``tool_seconds`` (past it: a `timeout` observation, the
session ended). A process that dies mid-episode is restarted from ``reset`` with the same seed and the calls it
had answered replayed (the world is deterministic given them), and the call it died in is a `tool_error`
observation; past ``MAX_RESTARTS``, or when the restart fails, the episode is the world's failure (`WorldFailed`),
never a wrong answer.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

from engine.episodes import plugin_packages, plugin_runtime, plugins, world_pool
from engine.episodes.world import ToolResult, WorldResetError, environment_program
from engine.sandbox import SandboxLimits
from engine.sandbox.session import SandboxSession, SessionEnded, SessionTimeout
from engine.sandbox.view import sandbox_for
from engine.worlds.provider import WorldFailed

MEMORY_MB = 512
RESET_SECONDS = 20.0
MAX_RESET_SECONDS = 120.0
MAX_RESTARTS = 2
LIFETIME_SECONDS = 3600.0


def plugin_from_class(
    environment_class: Any, *, name: str, distribution: str = "", version: str = "", source: Any = None
) -> plugins.Plugin:
    """Validate a stateful environment class (as its declaration helper read it, engine/episodes/declared.py,
    with ``source`` its module's; or a class loaded here, in tests); raises plugins.PluginError saying what to fix."""
    label = f"{environment_class.__module__}.{environment_class.__qualname__}"
    for method in ("reset", "snapshot"):
        if not callable(getattr(environment_class, method, None)):
            raise plugins.PluginError(f"{label} lacks the method {method} (see docs/environments.md)")
    schemas = getattr(environment_class, "TOOL_SCHEMAS", None)
    if not callable(getattr(environment_class, "step", None)) and isinstance(schemas, (list, tuple)):
        missing = [
            schema["function"]["name"]
            for schema in schemas
            if isinstance(schema, dict)
            and isinstance(schema.get("function"), dict)
            and not callable(getattr(environment_class, str(schema["function"].get("name")), None))
        ]
        if missing:
            raise plugins.PluginError(
                f"TOOL_SCHEMAS names {', '.join(missing)}, which {label} has no method for: add the method "
                "(or one step(self, name, arguments)), or remove the schema"
            )
    for setting, most in (("MEMORY_MB", 1 << 16), ("RESET_SECONDS", MAX_RESET_SECONDS)):
        value = getattr(environment_class, setting, None)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and not (number and 0 < value <= most):
            raise plugins.PluginError(f"{label}.{setting} must be a number above 0 and at most {most:g}")
    source = source if source is not None else sys.modules[environment_class.__module__]
    plugin = plugins.plugin_from_module(
        source,
        name=name,
        distribution=distribution,
        version=version,
        contract=plugin_runtime.StatefulPlugin(environment_class),
    )
    return dataclasses.replace(plugin, attribute=environment_class.__qualname__)


class StatefulWorld:
    """A stateful plug-in's world for one episode, in one sandbox session (see the module docstring)."""

    def __init__(self, *, environment: str, seed: int, tool_seconds: float = 5.0, sandbox: Any = None) -> None:
        plugin = plugins.get(environment)
        if not plugin.stateful:
            raise ValueError(f"environment {environment} is not stateful: its episodes use SandboxedWorld")
        environment_class = plugin.module.environment_class
        self.environment = environment
        self.seed = seed
        self.tool_seconds = tool_seconds
        self.reset_seconds = float(getattr(environment_class, "RESET_SECONDS", RESET_SECONDS))
        memory = int(getattr(environment_class, "MEMORY_MB", MEMORY_MB)) << 20
        self._sandbox = sandbox or sandbox_for(plugin_packages.sandbox_view(plugin))
        # cpu_seconds is the whole life's CPU (an rlimit of the one process); each call is bounded by its wall.
        self._limits = SandboxLimits(
            wall_seconds=self.reset_seconds, cpu_seconds=LIFETIME_SECONDS, memory_bytes=memory, max_output_bytes=8 << 20
        )
        self._program = environment_program(environment, main="session_main")
        self._session: SandboxSession | None = None
        self._answered: list[tuple[str, Any]] = []  # the calls the world answered, for a restart
        self.restarts = 0
        self.reset_ms: float | None = None
        self.pooled = False  # whether the current process was pre-started (engine/episodes/world_pool.py)

    # -- the session ----------------------------------------------------------------------------------------

    def _request(self, request: dict[str, Any], *, seconds: float) -> dict[str, Any]:
        """One request to the session; raises SessionTimeout or SessionEnded."""
        if self._session is None or not self._session.open:
            raise SessionEnded("the world's process is not running", run=None)
        reply = json.loads(self._session.exchange(json.dumps(request, default=str).encode(), seconds=seconds))
        if not isinstance(reply, dict):
            raise SessionEnded("the world gave a malformed reply", run=None)
        return reply

    def _ending(self, error: Exception) -> str:
        """Why the session ended, in a few words (the last line of the program's stderr when it has one)."""
        run = getattr(error, "run", None)
        detail = str(error)
        if run is not None and run.status == "signaled":
            detail = f"{detail} (killed by signal {run.signal})"
        elif run is not None and run.status == "exited":
            detail = f"{detail} (exit code {run.exit_code})"
        elif run is not None and run.error:
            detail = f"{detail} ({run.error})"
        tail = self._session.stderr_tail().strip().splitlines()[-1:] if self._session is not None else []
        return f"{detail}: {tail[0][:300]}" if tail else detail

    def _open(self, *, pooled: bool) -> SandboxSession:
        """The episode's process: a pre-started one when the pool has it ready (``pooled``), else a new one."""

        def start() -> SandboxSession:
            return self._sandbox.open_session(
                program=self._program, limits=self._limits, lifetime_seconds=LIFETIME_SECONDS
            )

        key = (self.environment, id(self._sandbox), self._limits, hash(self._program))
        session = world_pool.take(key, start) if pooled else None
        self.pooled = session is not None
        return session if session is not None else start()

    def _start(self) -> None:
        """A process reset from the seed, within reset_seconds; WorldResetError when it cannot. A pre-started
        process that died while it waited is replaced by a fresh one (the plug-in's failure repeats there)."""
        self.close()
        deadline = time.monotonic() + self.reset_seconds
        try:
            self._session = self._open(pooled=True)
            try:
                reply = self._request({"op": "reset", "seed": self.seed}, seconds=self._left(deadline))
            except SessionEnded:
                if not self.pooled:
                    raise
                self.close()
                self._session = self._open(pooled=False)
                reply = self._request({"op": "reset", "seed": self.seed}, seconds=self._left(deadline))
        except SessionTimeout:
            self.close()
            raise WorldResetError(
                f"environment {self.environment} could not reset from seed {self.seed}: "
                f"start and reset took longer than {self.reset_seconds:g} s"
            ) from None
        except (SessionEnded, ValueError) as error:
            why = self._ending(error)
            self.close()
            message = f"environment {self.environment} could not reset from seed {self.seed}: {why}"
            raise WorldResetError(message) from None
        if reply.get("status") != "ok":
            self.close()
            raise WorldResetError(
                f"environment {self.environment} could not reset from seed {self.seed}: {reply.get('error', reply)}"
            )

    @staticmethod
    def _left(deadline: float) -> float:
        return max(deadline - time.monotonic(), 0.01)

    def reset(self) -> float:
        """Start the world's process and reset it from the seed, before the model is asked anything; how long
        that took (ms). Raises WorldResetError (a crash, a hang past reset_seconds)."""
        started = time.perf_counter()
        self._answered = []
        self._start()
        self.reset_ms = round((time.perf_counter() - started) * 1000, 3)
        return self.reset_ms

    def _restart(self, crash: str) -> None:
        """After a crash: a fresh process from the same seed with the answered calls replayed; WorldFailed past
        MAX_RESTARTS or when that fails."""
        self.restarts += 1
        failure = f"world {self.environment}: its process died ({crash})"
        if self.restarts > MAX_RESTARTS:
            raise WorldFailed(f"{failure}, {self.restarts} times in one episode")
        try:
            self._start()
            for name, arguments in self._answered:
                self._request({"op": "call", "tool": name, "arguments": arguments}, seconds=self.tool_seconds)
        except (WorldResetError, SessionTimeout, SessionEnded, ValueError) as error:
            self.close()
            raise WorldFailed(f"{failure}, and it could not be restarted from seed {self.seed}: {error}") from None

    # -- the World protocol ---------------------------------------------------------------------------------

    def call(self, name: str, arguments: Any) -> ToolResult:
        started = time.perf_counter()
        if self._session is None:
            self.reset()
        try:
            reply = self._request({"op": "call", "tool": name, "arguments": arguments}, seconds=self.tool_seconds)
        except SessionTimeout:
            latency_ms = (time.perf_counter() - started) * 1000
            return ToolResult("timeout", json.dumps({"error": "the tool timed out"}), latency_ms)
        except (SessionEnded, ValueError) as error:
            crash = self._ending(error)
            self._restart(crash)
            message = f"tool crashed: {crash}; the world was restarted from its seed and your earlier calls replayed"
            return ToolResult("tool_error", json.dumps({"error": message}), (time.perf_counter() - started) * 1000)
        self._answered.append((name, arguments))
        status = reply.get("status")
        if status not in plugin_runtime.STATUSES or not isinstance(reply.get("content"), str):
            status, reply = "tool_error", {"content": json.dumps({"error": "the tool gave a malformed reply"})}
        return ToolResult(str(status), reply["content"], (time.perf_counter() - started) * 1000)

    def state(self) -> dict[str, list[dict[str, Any]]]:
        """The world's snapshot, read in its process; RuntimeError when it cannot be read."""
        try:
            reply = self._request({"op": "state"}, seconds=self.tool_seconds)
        except (SessionTimeout, SessionEnded, ValueError) as error:
            raise RuntimeError(f"could not read the world's state: {error}") from None
        if reply.get("status") != "ok":
            raise RuntimeError(f"could not read the world's state: {reply.get('error', reply)}")
        return reply["state"]

    def close(self) -> None:
        """End the world's process (safe to call twice)."""
        session, self._session = self._session, None
        if session is not None:
            session.close()
