"""What runs a plug-in's tools, the same code in this process and inside the sandbox.

Standard library only and nothing of Passband: `world.environment_program` bundles this module's
source with the plug-in's package into the one program a sandbox run executes, where `sandbox_main`
serves one request. `LocalWorld` (trusted input only) imports it normally. See docs/environments.md
for the plug-in contract these functions rely on.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

STATUSES = ("ok", "unknown_tool", "bad_arguments", "tool_error")


def _observation(status: str, payload: Any) -> dict[str, Any]:
    return {"status": status, "content": json.dumps(payload, sort_keys=True, default=str)}


def _schemas_by_name(plugin: Any) -> dict[str, dict[str, Any]]:
    return {schema["function"]["name"]: schema["function"].get("parameters") or {} for schema in plugin.TOOL_SCHEMAS}


def _argument_problem(name: str, parameters: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Required arguments present and none unknown: the part of the schema every plug-in gets checked for free."""
    properties = parameters.get("properties") or {}
    missing = [key for key in parameters.get("required", []) if key not in arguments]
    if missing:
        return f"{name} needs the argument(s) {', '.join(missing)}"
    if parameters.get("additionalProperties", False) is False and properties:
        unknown = [key for key in arguments if key not in properties]
        if unknown:
            return f"{name} has no argument(s) {', '.join(unknown)}; it takes {', '.join(properties)}"
    return None


def call_tool(plugin: Any, world: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """One tool call on `world`; never raises. Returns {"status": one of STATUSES, "content": JSON text}.

    A plug-in with its own `call_tool(world, name, arguments)` is trusted to follow the same rules; otherwise
    its `TOOLS[name](world, **arguments)` runs, after the name and the required/unknown arguments are checked,
    and an exception becomes an observation: one with a `status` attribute of "bad_arguments" (or a
    ValueError/TypeError) is `bad_arguments`, anything else `tool_error`.
    """
    own = getattr(plugin, "call_tool", None)
    if own is not None:
        try:
            reply = own(world, name, arguments)
        except Exception as error:  # noqa: BLE001 - a tool failure is an observation, not a crash
            return _observation("tool_error", {"error": f"{type(error).__name__}: {error}"})
        if (
            not isinstance(reply, dict)
            or reply.get("status") not in STATUSES
            or not isinstance(reply.get("content"), str)
        ):
            return _observation("tool_error", {"error": "the tool gave a malformed reply"})
        return reply
    schemas = _schemas_by_name(plugin)
    if not isinstance(name, str) or name not in schemas or name not in plugin.TOOLS:
        return _observation("unknown_tool", {"error": f"unknown tool {name!r}; tools: {', '.join(schemas)}"})
    if not isinstance(arguments, dict):
        return _observation("bad_arguments", {"error": "arguments must be a JSON object"})
    problem = _argument_problem(name, schemas[name], arguments)
    if problem:
        return _observation("bad_arguments", {"error": problem})
    try:
        result = plugin.TOOLS[name](world, **arguments)
    except Exception as error:  # noqa: BLE001
        status = getattr(error, "status", None)
        if status not in ("bad_arguments", "tool_error"):
            status = "bad_arguments" if isinstance(error, (ValueError, TypeError)) else "tool_error"
        return _observation(status, {"error": str(error) or type(error).__name__})
    return _observation("ok", result)


def replay(plugin: Any, world: Any, calls: list[dict[str, Any]]) -> None:
    """Apply a reference solution (tool calls {"name", "arguments"}) to `world`, the way audits check it:
    the plug-in's own `replay(world, calls)` when it has one, else each call through `call_tool` in order."""
    own = getattr(plugin, "replay", None)
    if own is not None:
        own(world, calls)
        return
    for call in calls:
        call_tool(plugin, world, call.get("name"), call.get("arguments"))


class StatefulPlugin:
    """A stateful, gym-style environment class seen through the module contract, so that the same runtime
    serves it: ``reset(seed)`` makes an instance and calls its ``reset``, each tool is the instance's method of
    that name (or its ``step(name, arguments)``), ``snapshot(world)`` is its ``snapshot()``. It has no bytes
    form: its world lives in one process for the whole episode (``session_main``)."""

    def __init__(self, environment_class: Any) -> None:
        self.environment_class = environment_class
        self.__name__ = f"{environment_class.__module__}.{environment_class.__qualname__}"
        self.TOOL_SCHEMAS = getattr(environment_class, "TOOL_SCHEMAS", None)
        self.TABLES = getattr(environment_class, "TABLES", None)
        for optional in ("STATE_CHECKS", "DEPENDENCIES", "REQUIREMENTS", "ENVIRONMENT"):
            if hasattr(environment_class, optional):
                setattr(self, optional, getattr(environment_class, optional))
        names = [schema["function"]["name"] for schema in self.TOOL_SCHEMAS or [] if isinstance(schema, dict)]
        stepped = callable(getattr(environment_class, "step", None))
        self.TOOLS = {name: self._tool(name, stepped) for name in names if stepped or hasattr(environment_class, name)}

    @staticmethod
    def _tool(name: str, stepped: bool) -> Any:
        if stepped:
            return lambda world, **arguments: world.step(name, arguments)
        return lambda world, **arguments: getattr(world, name)(**arguments)

    def reset(self, seed: int) -> Any:
        world = self.environment_class()
        world.reset(seed)
        return world

    def snapshot(self, world: Any) -> Any:
        return world.snapshot()

    def dump(self, world: Any) -> bytes:
        return b""

    def load(self, data: bytes) -> Any:
        raise RuntimeError("a stateful environment's world lives in its process; it cannot be loaded from bytes")


def plugin_of(module: Any, attribute: str) -> Any:
    """What the runtime serves: the module itself, or its stateful class ``attribute`` seen as a plug-in."""
    return StatefulPlugin(getattr(module, attribute)) if attribute else module


def session_main(plugin: Any) -> None:
    """One world for a whole episode (a sandbox session). Each stdin line is a request, each answered by one
    stdout line: {"op": "reset", "seed"} -> {"status": "ok"}; {"op": "call", "tool", "arguments"} -> the
    observation ({"status", "content"}); {"op": "state"} -> {"status": "ok", "state"}. A reset or snapshot that
    raises answers {"status": "error", "error"}. What the plug-in prints goes to stderr, never into a reply."""
    import os

    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    world = None
    for line in sys.stdin.buffer:
        request = json.loads(line)
        operation = request.get("op")
        try:
            if operation == "reset":
                world = plugin.reset(int(request["seed"]))
                reply: dict[str, Any] = {"status": "ok"}
            elif world is None:
                reply = {"status": "error", "error": "the world was not reset"}
            elif operation == "call":
                reply = call_tool(plugin, world, request.get("tool"), request.get("arguments"))
            else:
                reply = {"status": "ok", "state": plugin.snapshot(world)}
        except Exception as error:  # noqa: BLE001 - reported to the caller, who names the failure
            reply = {"status": "error", "error": f"{type(error).__name__}: {error}"[:500]}
        replies.write(json.dumps(reply, default=str) + "\n")
        replies.flush()


def state_check(plugin: Any, request: dict[str, Any]) -> dict[str, Any]:
    """{"status": "ok", "result": what STATE_CHECKS[request["state_check"]](request["state"], **arguments)
    returned} or {"status": "error", "error"}."""
    name = request["state_check"]
    try:
        function = (getattr(plugin, "STATE_CHECKS", None) or {})[name]
        return {"status": "ok", "result": function(request.get("state"), **dict(request.get("arguments") or {}))}
    except Exception as error:  # noqa: BLE001 - the caller names the crash
        return {"status": "error", "error": f"{type(error).__name__}: {error}"[:500]}


def self_check(plugin: Any, seed: int) -> dict[str, Any]:
    """What `manage.py environments --check` asks of the plug-in's functions: {"state": snapshot(reset(seed)),
    "reloaded": the same through dump and load (a stateful class's: the state), "again": a second reset's,
    "not_json": why the state is not JSON ("" when it is)}, or {"error"} when one of them raised."""
    try:
        state = plugin.snapshot(plugin.reset(seed))
        stateful = isinstance(plugin, StatefulPlugin)
        reloaded = state if stateful else plugin.snapshot(plugin.load(plugin.dump(plugin.reset(seed))))
        again = plugin.snapshot(plugin.reset(seed))
    except Exception as error:  # noqa: BLE001 - plug-in code; the report says what broke
        return {"error": f"reset/snapshot/dump/load raised {type(error).__name__}: {error}"[:500]}
    try:
        json.dumps(state, allow_nan=False)
        not_json = ""
    except (TypeError, ValueError) as error:
        not_json = str(error)
    same = {"reloaded": reloaded == state, "again": again == state}
    shape = sorted(state) if isinstance(state, dict) else repr(state)[:200]
    rows = isinstance(state, dict) and all(
        isinstance(table, list) and all(isinstance(row, dict) for row in table) for table in state.values()
    )
    return {"state": state, "tables": shape, "rows": rows, "same": same, "not_json": not_json}


def sandbox_main(plugin: Any) -> None:
    """One sandbox run. stdin: {"seed", "database" (base64 of `dump`, or null to reset), "tool" and "arguments"
    (or null), "calls" (a replay, optional), "want_state"}. stdout: {"status", "content", "database"}, plus
    "state" (the snapshot) when "want_state" was set. With "state_check" (and "state", "arguments"): that check's
    answer (`state_check`); with "self_check": `self_check`'s."""
    request = json.loads(sys.stdin.read())
    if request.get("state_check") is not None:
        sys.stdout.write(json.dumps({**state_check(plugin, request), "database": None}, default=str))
        return
    if request.get("self_check"):
        sys.stdout.write(json.dumps({**self_check(plugin, int(request["seed"])), "database": None}, default=str))
        return
    if request.get("database") is not None:
        world = plugin.load(base64.b64decode(request["database"]))
    else:
        world = plugin.reset(int(request["seed"]))
    reply: dict[str, Any] = {"status": "ok", "content": ""}
    if request.get("calls") is not None:
        replay(plugin, world, request["calls"])
    if request.get("tool") is not None:
        reply = call_tool(plugin, world, request["tool"], request.get("arguments"))
    reply["database"] = base64.b64encode(plugin.dump(world)).decode("ascii")
    if request.get("want_state"):
        reply["state"] = plugin.snapshot(world)
    sys.stdout.write(json.dumps(reply))
