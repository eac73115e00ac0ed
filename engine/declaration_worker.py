"""An installed entry point's declaration, read in a helper process (see engine/verifiers/helper_loop.py for the
protocol): the only place an installed verifier kind's or world provider's package is imported to learn what it
declares (engine/declarations.py is the host's side).

Run as ``python -I declaration_worker.py <memory_bytes>`` with an empty environment; locked down before any
request, so the package's import (its module's top-level code) cannot start processes, open connections, write
files, use ctypes or read other processes' /proc entries.

Request:  {"op": "declare", "group", "value" (``package.module[:OBJECT]``), "path" (the host's import path),
           "timeout_seconds"}
Response: {"kind": data} (``passband.verifiers``) | {"provider": data} | {"environment": "module" | "class",
          "declaration": data} (``passband.environments``: a tool-environment plug-in, engine/episodes/plugins.py;
          data: what `tool_declaration` reads, which the host validates) |
          {"refused": why, "error": exception type} | {"timeout"}
"""

from __future__ import annotations

import json
import os
import sys
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if __package__:  # imported as engine.declaration_worker
    from engine.verifiers import helper_loop
else:  # the helper script (python -I): this checkout's engine first, then the installed packages
    sys.path.insert(0, ROOT)
    from engine.verifiers import helper_loop
from engine.verifiers.kind import VerifierKind, kind_problems  # noqa: E402 - once the checkout is on the path
from engine.worlds.provider import WorldProvider, provider_problems  # noqa: E402

KINDS = "passband.verifiers"
ENVIRONMENTS = "passband.environments"


def kind_declaration(kind: VerifierKind) -> dict:
    """A well-formed kind's name, traits and examples, and which optional hooks it has, as JSON data."""
    source, exports = kind.outside_source, kind.exports
    return {
        "name": kind.name,
        "audit_task": kind.audit_task is not None,
        "page_context": kind.page_context is not None,
        "audit_shows_detail": kind.audit_shows_detail,
        "batchable": kind.batchable,
        "gameability": kind.gameability,
        "page_fragment": kind.page_fragment,
        "outside_source": None if source is None else {"field": source.field, "package": source.package},
        "exports": None if exports is None else {"package": exports.package, "harbor": exports.harbor is not None},
        "examples": [
            {
                "verifier": dict(example.verifier),
                "passing": example.passing,
                "failing": example.failing,
                "answer": example.answer,
                "prompt": example.prompt,
            }
            for example in kind.examples
        ],
        "examples_unavailable": kind.examples_unavailable,
        "check_seconds": kind.check_seconds,
        "version": kind.version,
    }


def provider_declaration(provider: WorldProvider) -> dict:
    """A well-formed provider's name, examples, description, version and remote protocol, as JSON data."""
    examples = []
    for example in provider.examples:
        if example.task.server is not None:
            raise ValueError("an installed provider's examples cannot be on a remote server")
        task = example.task
        examples.append(
            {
                "task": {"prompt": task.prompt, "tools": task.tools, "verifier": dict(task.verifier)},
                "call": [example.call[0], dict(example.call[1])],
            }
        )
    remote = provider.remote
    return {
        "name": provider.name,
        "examples": examples,
        "examples_unavailable": provider.examples_unavailable,
        "description": provider.description,
        "version": provider.version,
        "remote": None if remote is None else {"label": remote.label, "list_tools": remote.list_tools is not None},
    }


# What a tool environment's module (or stateful class) may declare; the host validates it (engine/episodes/plugins.py)
TOOL_ATTRIBUTES = (
    "TOOL_SCHEMAS", "TABLES", "TOOLS", "STATE_CHECKS", "ENVIRONMENT", "DEPENDENCIES", "REQUIREMENTS", "MEMORY_MB",
    "RESET_SECONDS", "reset", "snapshot", "dump", "load", "call_tool", "replay", "step",
)  # fmt: skip
DEPTH = 32


def encoded(value: object, depth: int = 0) -> list:
    """``value`` as tagged JSON data ([tag, data]): the plain values, lists, tuples and dicts as they are, anything
    callable as ["callable", its name], anything else as ["other", its type's name] (engine/episodes/declared.py
    decodes it)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return ["value", value]
    if depth > DEPTH:
        return ["other", "too deeply nested"]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [encoded(item, depth + 1) for item in value]]
    if isinstance(value, dict):
        return ["dict", [[encoded(key, depth + 1), encoded(item, depth + 1)] for key, item in value.items()]]
    if callable(value):
        return ["callable", str(getattr(value, "__qualname__", type(value).__name__))]
    return ["other", type(value).__name__]


def tool_declaration(loaded: ModuleType | type) -> dict:
    """A tool environment's declaration as data: where its source lives, and each attribute of the contract it has
    (a stateful class's tool methods included), encoded; nothing of it is called."""
    stateful = isinstance(loaded, type)
    module = sys.modules[loaded.__module__] if isinstance(loaded, type) else loaded
    names = list(TOOL_ATTRIBUTES)
    schemas = getattr(loaded, "TOOL_SCHEMAS", None)
    if stateful and isinstance(schemas, (list, tuple)):
        for schema in schemas:
            function = schema.get("function") if isinstance(schema, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
    return {
        "module": module.__name__,
        "file": getattr(module, "__file__", None),
        "package": hasattr(module, "__path__"),
        "qualname": loaded.__qualname__ if isinstance(loaded, type) else "",
        "attributes": {name: encoded(getattr(loaded, name)) for name in dict.fromkeys(names) if hasattr(loaded, name)},
    }


def _declare(group: str, loaded: object) -> dict:
    if group == ENVIRONMENTS and isinstance(loaded, (ModuleType, type)):
        kind = "module" if isinstance(loaded, ModuleType) else "class"
        return {"environment": kind, "declaration": tool_declaration(loaded)}
    problems = kind_problems(loaded) if group == KINDS else provider_problems(loaded)
    if problems:
        return {"refused": "; ".join(problems), "error": "malformed"}
    if group == KINDS:
        return {"kind": kind_declaration(loaded)}  # type: ignore[arg-type]
    return {"provider": provider_declaration(loaded)}  # type: ignore[arg-type]


def evaluate(request: dict) -> dict:
    """Import one entry point's object and answer what it declares; its errors become answers."""
    from importlib import metadata

    group, value = str(request.get("group")), str(request.get("value"))
    if group not in (KINDS, ENVIRONMENTS):
        return {"refused": f"unknown entry point group {group!r}", "error": "malformed"}
    sys.path[:] = [ROOT, *(path for path in request.get("path") or [] if isinstance(path, str)), *sys.path]
    try:
        with helper_loop.loading():
            loaded = metadata.EntryPoint(name="declared", value=value, group=group).load()
    except Exception as error:  # noqa: BLE001 - a stale or broken package is refused, with why
        return {"refused": f"importing {value} failed: {type(error).__name__}: {error}", "error": type(error).__name__}
    try:
        response = _declare(group, loaded)
        json.dumps(response)
        return response
    except Exception as error:  # noqa: BLE001 - a declaration that is not data is refused
        return {"refused": f"its declaration cannot be read: {type(error).__name__}: {error}", "error": "malformed"}


def _timed_out(request: dict) -> dict:
    return {"timeout": f"importing {request.get('value')} took over {request.get('timeout_seconds', 5)} s"}


def main() -> None:
    helper_loop.serve(evaluate, timed_out=_timed_out, lockdown=True, lock_load=True)


if __name__ == "__main__":
    main()
