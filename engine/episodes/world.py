"""Tool environments an episode acts on, and where their tool code runs.

Environments are plug-ins (`engine.episodes.plugins`): packages declared under the entry point group
`passband.environments`, Passband's own `backoffice` among them. A world is reset from (environment,
seed) and then takes tool calls one at a time:

* `SandboxedWorld` (what episodes use): every tool call is one run of the code sandbox
  (`engine.sandbox`, the same isolation as code verification). The run's program is the plug-in's
  package source bundled with `plugin_runtime` into one script (`environment_program`); its stdin
  carries the world's state (the bytes of the plug-in's `dump`), the tool name and the model's
  arguments as JSON; its stdout carries the observation and the new state. The worker process
  therefore never executes a tool on model input, and a tool that hangs or eats memory is killed by
  the sandbox's wall-clock, CPU and memory limits: the call becomes a `timeout` observation, and the
  episode ends with stop reason `tool_timeout`. `replay_state` replays a list of calls in one run.
* `LocalWorld`: the same tool code imported into this process. Only for trusted input: tests, and
  building Passband's own backoffice demo tasks; never in a worker or web process for an installed plug-in.

`initial_state` (reset by seed, then snapshot) and `run_state_check` (one of its STATE_CHECKS on a state)
run the plug-in in the sandbox too: a worker or web process never imports a plug-in's package
(engine/episodes/plugins.py reads its declaration in a helper).
"""

from __future__ import annotations

import importlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.episodes import plugin_packages, plugin_runtime, plugins
from engine.sandbox import SandboxLimits
from engine.sandbox.view import sandbox_for

_SOURCES: dict[tuple[str, str, str], str] = {}
_INITIAL: dict[tuple[str, int], tuple[Any, str]] = {}  # (environment, seed) -> (its plug-in, its initial state)
INITIAL_KEPT = 256
_INITIAL_LOCK = threading.Lock()
RUNTIME_MODULE = "_passband_plugin_runtime"

# The sandboxed program: the plug-in's modules travel as source text and are imported from it by a
# finder on sys.meta_path (the sandbox sees no installed packages), then plugin_runtime serves the request.
_BUNDLE = """\
import importlib, importlib.abc, importlib.util, sys

MODULE = {module!r}
SOURCES = {sources!r}
PACKAGES = {packages!r}


class _Bundled(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name not in SOURCES:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=name in PACKAGES)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ in PACKAGES:
            module.__path__ = []
        exec(compile(SOURCES[module.__name__], module.__name__ + ".py", "exec", dont_inherit=True), module.__dict__)


sys.meta_path.insert(0, _Bundled())
_runtime = importlib.import_module({runtime!r})
_runtime.{main}(_runtime.plugin_of(importlib.import_module(MODULE), {attribute!r}))
"""


def environment(name: str) -> plugins.Plugin:
    """The discovered plug-in of a named tool environment; raises plugins.UnknownEnvironment (a KeyError)
    whose message lists the installed ones."""
    return plugins.get(name)


def environment_module(name: str) -> Any:
    """The plug-in of a named tool environment, imported in this process (its module, or its stateful class seen
    as one): for `LocalWorld` alone, trusted input only, never in a worker or web process. Raises
    plugins.UnknownEnvironment (a KeyError)."""
    plugin = plugins.get(name)
    return plugin_runtime.plugin_of(importlib.import_module(plugin.module_name), plugin.attribute)


def environment_program(name: str, *, main: str = "sandbox_main") -> str:
    """The one script a sandbox run executes for environment `name`: its package's modules (standard
    library and each other only, checked at discovery) and `plugin_runtime`, bundled with a loader. `main`:
    the runtime's entry, `sandbox_main` (one request per run) or `session_main` (a stateful world's session)."""
    plugin = plugins.get(name)
    key = (name, plugin.module_name, main)
    if key not in _SOURCES:
        sources: dict[str, str] = {}
        packages: set[str] = set()
        for module, path in plugin.source_modules:
            sources[module] = path.read_text(encoding="utf-8")
            if path.name == "__init__.py":
                packages.add(module)
        # Parent packages of a nested plug-in (engine.episodes.backoffice) exist in the sandbox, empty.
        parts = plugin.module_name.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            sources.setdefault(parent, "")
            packages.add(parent)
        sources[RUNTIME_MODULE] = Path(plugin_runtime.__file__).read_text(encoding="utf-8")
        _SOURCES[key] = _BUNDLE.format(
            module=plugin.module_name,
            sources=sources,
            packages=sorted(packages),
            runtime=RUNTIME_MODULE,
            main=main,
            attribute=plugin.attribute,
        )
    return _SOURCES[key]


def tool_schemas(environment: str) -> list[dict[str, Any]]:
    """The OpenAI function schemas of an environment's tools."""
    return json.loads(json.dumps(list(plugins.get(environment).tool_schemas)))


def initial_state(
    *, environment: str, seed: int, seconds: float = 20.0, sandbox: Any = None
) -> dict[str, list[dict[str, Any]]]:
    """The state a world of (environment, seed) starts from, reset and read in the sandbox (a stateful plug-in's:
    in its own session), within ``seconds``; RuntimeError when it cannot be. Kept per discovered plug-in and seed
    (reset is deterministic given the seed, which `manage.py environments --check` checks), a copy each time."""
    plugin = plugins.get(environment)
    with _INITIAL_LOCK:
        known = _INITIAL.get((environment, seed))
    if sandbox is None and known is not None and known[0] is plugin:
        return json.loads(known[1])
    state = _initial_state(environment=environment, seed=seed, seconds=seconds, sandbox=sandbox, plugin=plugin)
    if sandbox is None:
        with _INITIAL_LOCK:
            while len(_INITIAL) >= INITIAL_KEPT:
                _INITIAL.pop(next(iter(_INITIAL)))
            _INITIAL[(environment, seed)] = (plugin, json.dumps(state))
    return state


def _initial_state(
    *, environment: str, seed: int, seconds: float, sandbox: Any, plugin: plugins.Plugin
) -> dict[str, list[dict[str, Any]]]:
    if plugin.stateful:
        from engine.episodes.stateful import StatefulWorld

        session = StatefulWorld(environment=environment, seed=seed, tool_seconds=seconds, sandbox=sandbox)
        try:
            session.reset()
            return session.state()
        except WorldResetError as error:
            raise RuntimeError(str(error)) from None
        finally:
            session.close()
    return SandboxedWorld(environment=environment, seed=seed, tool_seconds=seconds, sandbox=sandbox).state()


def run_state_check(
    *, environment: str, check: str, state: Any, arguments: dict[str, Any], seconds: float = 20.0, sandbox: Any = None
) -> Any:
    """What the plug-in's STATE_CHECKS[check](state, **arguments) returns, run in its sandbox (the state is the
    model's doing); RuntimeError saying why when it crashed or ran past ``seconds``."""
    checker = SandboxedWorld(environment=environment, seed=0, tool_seconds=seconds, sandbox=sandbox)
    reply, result = checker._run({"state_check": check, "state": state, "arguments": arguments})
    if reply is None:
        assert result is not None
        raise RuntimeError(json.loads(result.content).get("error", result.status))
    if reply.get("status") != "ok":
        raise RuntimeError(str(reply.get("error", reply)))
    return reply.get("result")


def state_diff(
    *, before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Rows added, removed or changed between two states, by table and id, for the viewer.

    Each change is {"table", "id", "change": "added" | "removed" | "changed", "fields": {name: [before, after]}}.
    """
    changes: list[dict[str, Any]] = []
    for table in sorted(set(before) | set(after)):
        old = {row.get("id"): row for row in before.get(table, [])}
        new = {row.get("id"): row for row in after.get(table, [])}
        for row_id in sorted(set(old) | set(new), key=lambda value: (value is None, value)):
            if row_id not in new:
                changes.append({"table": table, "id": row_id, "change": "removed", "fields": {}})
            elif row_id not in old:
                fields = {name: [None, value] for name, value in new[row_id].items()}
                changes.append({"table": table, "id": row_id, "change": "added", "fields": fields})
            elif old[row_id] != new[row_id]:
                fields = {
                    name: [old[row_id].get(name), new[row_id].get(name)]
                    for name in sorted(set(old[row_id]) | set(new[row_id]))
                    if old[row_id].get(name) != new[row_id].get(name)
                }
                changes.append({"table": table, "id": row_id, "change": "changed", "fields": fields})
    return changes


@dataclass(frozen=True)
class ToolResult:
    """One tool call's observation. status: ok, unknown_tool, bad_arguments, tool_error, timeout."""

    status: str
    content: str
    latency_ms: float


class World(Protocol):
    environment: str
    seed: int

    def call(self, name: str, arguments: Any) -> ToolResult: ...

    # A plug-in world's tables ({table: [rows]}); a remote server's rewards and state (remote_mcp,
    # remote_openenv); a repository world's edits (engine/repo_tasks/world.py).
    def state(self) -> dict[str, Any]: ...


class LocalWorld:
    """The environment's tools in this process (trusted input only; see the module docstring)."""

    def __init__(self, *, environment: str, seed: int) -> None:
        self.environment = environment
        self.seed = seed
        self._module = environment_module(environment)
        self._world = self._module.reset(seed)

    def call(self, name: str, arguments: Any) -> ToolResult:
        started = time.perf_counter()
        reply = plugin_runtime.call_tool(self._module, self._world, name, arguments)
        return ToolResult(reply["status"], reply["content"], (time.perf_counter() - started) * 1000)

    def state(self) -> dict[str, list[dict[str, Any]]]:
        return self._module.snapshot(self._world)


class SandboxedWorld:
    """The environment's tools, each call in a fresh sandbox run; the state travels as bytes."""

    def __init__(self, *, environment: str, seed: int, tool_seconds: float = 5.0, sandbox: Any = None) -> None:
        self.environment = environment
        self.seed = seed
        # The plug-in's own view: the standard library and the packages it declares, nothing of Passband's.
        self._sandbox = sandbox or sandbox_for(plugin_packages.sandbox_view(plugins.get(environment)))
        self._limits = SandboxLimits(
            wall_seconds=tool_seconds, cpu_seconds=tool_seconds, memory_bytes=512 << 20, max_output_bytes=8 << 20
        )
        self._source = environment_program(environment)
        self._database: str | None = None  # base64 of the plug-in's dump of the world; None before reset
        self._last_state: dict[str, list[dict[str, Any]]] | None = None
        # How long the explicit reset took (ms), for the environment's health; None until reset() ran.
        self.reset_ms: float | None = None

    def _run(self, request: dict[str, Any]) -> tuple[dict[str, Any] | None, ToolResult | None]:
        started = time.perf_counter()
        request = {"seed": self.seed, "database": self._database, **request}
        run = self._sandbox.run_script(program=self._source, stdin=json.dumps(request), limits=self._limits)
        latency_ms = (time.perf_counter() - started) * 1000
        if run.status == "timeout":
            return None, ToolResult("timeout", json.dumps({"error": "the tool timed out"}), latency_ms)
        if run.status != "exited" or run.exit_code != 0:
            detail = run.error or run.stderr.strip().splitlines()[-1:] or [run.status]
            message = detail if isinstance(detail, str) else detail[0]
            return None, ToolResult("tool_error", json.dumps({"error": f"tool crashed: {message[:300]}"}), latency_ms)
        try:
            reply = json.loads(run.stdout)
        except ValueError:
            return None, ToolResult("tool_error", json.dumps({"error": "tool gave no reply"}), latency_ms)
        self._database = reply.pop("database")
        return reply, ToolResult(reply.get("status", "ok"), reply.get("content", ""), latency_ms)

    def reset(self) -> float:
        """Reset the world from its seed in one sandbox run, before the model is asked anything, and return
        how long that took (ms). Raises WorldResetError when the plug-in cannot reset (a crash, a timeout):
        the environment's failure, never the model's, and no model tokens spent on a world that is not there.
        Without it, the first tool call resets the world."""
        reply, result = self._run({"tool": None})
        assert result is not None
        if reply is None:
            raise WorldResetError(
                f"environment {self.environment} could not reset from seed {self.seed}: "
                f"{json.loads(result.content).get('error', result.status)}"
            )
        self.reset_ms = round(result.latency_ms, 3)
        return self.reset_ms

    def call(self, name: str, arguments: Any) -> ToolResult:
        if plugins.get(self.environment).stateful:
            raise RuntimeError(f"environment {self.environment} is stateful: its episodes use StatefulWorld")
        reply, result = self._run({"tool": name, "arguments": arguments})
        assert result is not None
        return result

    def state(self) -> dict[str, list[dict[str, Any]]]:
        """The current state, read inside the sandbox too (the database bytes are model-influenced)."""
        reply, result = self._run({"tool": None, "want_state": True})
        if reply is None:
            raise RuntimeError(f"could not read the world's state: {result.content if result else ''}")
        return reply["state"]


class WorldResetError(RuntimeError):
    """A world could not be reset from its seed (the plug-in crashed or hung): an environment failure."""


class ReplayTimeout(Exception):
    """A replay ran past its time limit in the sandbox."""


def replay_state(
    *, environment: str, seed: int, calls: list[dict[str, Any]], seconds: float = 20.0, sandbox: Any = None
) -> dict[str, list[dict[str, Any]]]:
    """The state after replaying `calls` ({"name", "arguments"}) on a fresh world of (environment, seed), all in
    one sandbox run (the plug-in's `replay` when it has one): how `state_check` judges tool calls, the author's
    reference solution during an audit included. Raises ReplayTimeout past `seconds`, RuntimeError on a crash."""
    world = SandboxedWorld(environment=environment, seed=seed, tool_seconds=seconds, sandbox=sandbox)
    reply, result = world._run({"tool": None, "calls": calls, "want_state": True})
    if reply is None:
        assert result is not None
        if result.status == "timeout":
            raise ReplayTimeout(f"replaying {len(calls)} tool calls took longer than {seconds:g} s")
        raise RuntimeError(f"replaying the tool calls failed: {json.loads(result.content).get('error', '')}")
    return reply["state"]
