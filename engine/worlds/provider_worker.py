"""An installed world provider's code, in a helper process (see engine/verifiers/helper_loop.py for the protocol).

Run as ``python -I provider_worker.py <memory_bytes> <entry point value>``: loads the provider that value of the
``passband.environments`` group names (``package.module:OBJECT``) and answers requests for it under
helper_loop's lockdown (no processes, network, file writes, ctypes or other processes' /proc entries), with an
empty environment. A pooled helper answers ``claims`` and ``prepare``; an episode's world lives in a helper of
its own, opened once (``open``), then asked for tool calls and the state until it is killed.

Request:  {"op": "claims" | "prepare" | "open" | "call" | "state" | "list_tools", "timeout_seconds": float, and
           per op "task" (prompt, tools, verifier, server), "options" (tool_seconds, reset_tries), "seed",
           "tool", "arguments"; list_tools: "name", "endpoint" (url, timeout_s)}
Response: {"claims": bool} | {"name"} (prepare) | {"name", "messages", "tools", "environment", "world_seed"}
          (open) | {"status", "content", "latency_ms"} (call) | {"state"} | {"tools"} | {"missing", "world"}
          (WorldMissing) | {"unavailable", "reason"} (RemoteUnavailable) | {"failed"} (WorldFailed, or the
          provider crashed) | {"error"} (no world open, a state that cannot be read) | {"timeout"} when the
          request ran out of time

A provider of a remote protocol reaches its server through the host: in an episode (its server's ``endpoint``
in the task) and a listing of tools, its client's requests are questions to the host
(engine/worlds/remote_relay.py, ``helper_loop.ask_host``), whose own code makes them to the registered server
alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if __package__:  # imported as engine.worlds.provider_worker
    from engine.verifiers import helper_loop
else:  # the helper script (python -I): this checkout's engine first, then the installed provider's package
    sys.path.insert(0, ROOT)
    from engine.verifiers import helper_loop

GROUP = "passband.environments"
_state: dict = {"provider": None, "episode": None, "world": None}


def _load() -> None:
    from importlib import metadata

    _state["provider"] = metadata.EntryPoint(name="provider", value=sys.argv[2], group=GROUP).load()
    if getattr(_state["provider"], "remote", None) is not None:
        from engine.worlds import remote_relay  # noqa: F401 - imported with the provider, before any request


def _task(raw: dict):
    from engine.worlds.provider import WorldTask

    server = raw.get("server")
    if server is not None:
        from engine.worlds.remote_relay import helper_server

        server = helper_server(server, helper_loop.ask_host)
    return WorldTask(
        prompt=raw.get("prompt") or [],
        tools=raw.get("tools") or [],
        verifier=raw.get("verifier") or {},
        server=server,
    )


def _list_tools(request: dict) -> dict:
    """The tools a server of the provider's protocol offers, listed by the provider through the host's relay."""
    from engine.worlds.remote_relay import relayed_endpoint

    remote = _state["provider"].remote
    endpoint = relayed_endpoint(str(request["name"]), request["endpoint"], helper_loop.ask_host)
    try:
        return {"tools": remote.list_tools(endpoint)}
    except Exception as error:  # noqa: BLE001 - the provider's client failed: the check's answer
        return {"failed": f"{type(error).__name__}: {str(error)[:300]}"}


def _options(raw: dict):
    from engine.worlds.provider import WorldOptions

    return WorldOptions(**{key: raw[key] for key in ("tool_seconds", "reset_tries") if key in raw})


def _open(request: dict) -> dict:
    provider = _state["provider"]
    worlds = provider.prepare(_task(request["task"]), _options(request.get("options") or {}))
    episode = contextlib.ExitStack()
    opened = episode.enter_context(worlds.episode(seed=int(request["seed"])))
    _state["episode"], _state["world"] = episode, opened.world
    return {
        "name": str(worlds.name),
        "messages": opened.messages,
        "tools": opened.tools,
        "environment": str(opened.environment),
        "world_seed": int(opened.world_seed),
    }


def _call(request: dict) -> dict:
    world = _state["world"]
    if world is None:
        return {"error": "no world is open in this helper"}
    try:
        result = world.call(str(request.get("tool")), request.get("arguments"))
    except Exception as error:  # noqa: BLE001 - the tool's crash is the call's observation
        message = f"tool crashed: {type(error).__name__}: {str(error)[:300]}"
        return {"status": "tool_error", "content": json.dumps({"error": message}), "latency_ms": 0.0}
    return {"status": str(result.status), "content": str(result.content), "latency_ms": float(result.latency_ms)}


def _answer(op: str, request: dict) -> dict:
    provider = _state["provider"]
    if op == "claims":
        return {"claims": bool(provider.claims(_task(request["task"])))}
    if op == "prepare":
        worlds = provider.prepare(_task(request["task"]), _options(request.get("options") or {}))
        return {"name": str(worlds.name)}
    if op == "open":
        return _open(request)
    if op == "list_tools":
        return _list_tools(request)
    if op == "call":
        return _call(request)
    if op == "state":
        if _state["world"] is None:
            return {"error": "no world is open in this helper"}
        return {"state": _state["world"].state()}
    return {"error": f"unknown request {op!r}"}


def evaluate(request: dict) -> dict:
    """Answer one request; the provider's errors become answers, never the helper's end."""
    from engine.episodes.remote_mcp import RemoteUnavailable
    from engine.worlds.provider import WorldFailed, WorldMissing

    try:
        response = _answer(str(request.get("op")), request)
        json.dumps(response)
        return response
    except RemoteUnavailable as unavailable:
        return {"unavailable": str(unavailable), "reason": str(unavailable.reason)}
    except WorldMissing as missing:
        return {"missing": str(missing), "world": str(missing.world)}
    except WorldFailed as failed:
        return {"failed": str(failed)}
    except Exception as error:  # noqa: BLE001 - the provider's crash is the world's failure, never the model's
        return {"failed": f"the provider crashed: {type(error).__name__}: {str(error)[:300]}"}


def _timed_out(request: dict) -> dict:
    return {"timeout": f"the provider took over {request.get('timeout_seconds', 5)} s"}


def main() -> None:
    helper_loop.serve(evaluate, load=_load, timed_out=_timed_out, lockdown=True, lock_load=True)


if __name__ == "__main__":
    main()
