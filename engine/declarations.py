"""What an installed verifier kind or world provider declares, read without importing its package here.

The registries (engine/verifiers/registry.py, engine/worlds/registry.py, engine/episodes/plugins.py) need an
installed entry point's declaration: its name, traits, examples, remote protocol, or whether it is a
tool-environment plug-in. Importing the package to read them would run its module's top-level code in the
worker or web process, with its environment and secrets; so each entry point is imported in a helper process
of its own (engine/declaration_worker.py: empty environment, memory cap, locked down before the import) that
answers with JSON data, which the host checks field by field and rebuilds the declaration from, every hook a
stand-in the registry replaces with requests to the plug-in's own helpers. Declarations are kept per process,
by entry point and installed distribution version: a registry built again starts no helper.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.registry import distribution_of, installed_entry_points
from engine.sandbox.worker_pool import HelperScript, WorkerFailed, WorkerTimeout
from engine.verifiers.kind import KindExample, KindExports, OutsideSource, VerifierKind
from engine.worlds.provider import ProviderExample, RemoteProtocol, WorldProvider, WorldTask

WORKER_SCRIPT = Path(__file__).resolve().parent / "declaration_worker.py"
WORKER_MEMORY_BYTES = 1 << 30
READ_SECONDS = 30.0  # start the helper, import the package, describe it
STARTED_AT_ONCE = 4
GROUPS = ("passband.verifiers", "passband.environments")

logger = logging.getLogger("engine.registry")

_script = HelperScript(WORKER_SCRIPT, memory_bytes=WORKER_MEMORY_BYTES)
_read: dict[tuple[str, str, str, str], dict[str, Any]] = {}
_lock = threading.Lock()


class DeclarationRefused(ValueError):
    """An entry point whose declaration could not be read or is malformed; the message says why.
    ``error`` is the exception type the import raised ("malformed" for a declaration that is not one)."""

    def __init__(self, message: str, *, error: str = "") -> None:
        super().__init__(message)
        self.error = error

    def naming(self, value: str) -> str:
        """The message for a registry's refusal of the entry point whose value is ``value``."""
        return f"{value} {self}" if self.error == "malformed" else str(self)


def _key(group: str, entry_point: metadata.EntryPoint) -> tuple[str, str, str, str]:
    distribution, version = distribution_of(entry_point)
    return (group, entry_point.value, distribution, version)


def _ask(group: str, value: str) -> dict[str, Any]:
    """One helper's answer for one entry point; raises WorkerFailed or WorkerTimeout when it gave none."""
    helper = _script.dedicated(startup_seconds=READ_SECONDS)
    try:
        request = {"op": "declare", "group": group, "value": value, "path": sys.path, "timeout_seconds": READ_SECONDS}
        return helper.exchange(request, deadline=time.monotonic() + READ_SECONDS + 1.0, host=None)
    finally:
        helper.kill()


def _read_one(group: str, entry_point: metadata.EntryPoint) -> dict[str, Any]:
    try:
        answer = _ask(group, entry_point.value)
    except (WorkerFailed, WorkerTimeout) as error:
        # Not the package's answer (a busy host, a helper that could not start): refused now, asked again later.
        return {"refused": f"its declaration could not be read in a helper process: {error or 'no answer in time'}"}
    if not isinstance(answer, dict):  # what the package's import made its helper say: data, checked
        answer = {"refused": f"its helper answered {type(answer).__name__}, not a declaration", "error": "malformed"}
    if "timeout" in answer:
        return {"refused": str(answer["timeout"]), "error": "timeout"}
    with _lock:
        _read[_key(group, entry_point)] = answer
    return answer


def read(group: str, entry_points: Iterable[metadata.EntryPoint]) -> None:
    """Read the declarations of ``entry_points`` not yet known in this process, a few helpers at a time."""
    with _lock:
        missing = [point for point in entry_points if _key(group, point) not in _read]
    if missing:
        with ThreadPoolExecutor(max_workers=min(STARTED_AT_ONCE, len(missing))) as pool:
            list(pool.map(lambda point: _read_one(group, point), missing))


def read_installed() -> None:
    """Read the declarations of every installed verifier kind and world provider (a worker before its pool
    forks); never raises: what cannot be read now is asked again when a registry needs it."""
    for group in GROUPS:
        try:
            read(group, installed_entry_points(group))
        except Exception as error:  # noqa: BLE001 - a head start, never a reason for the worker not to start
            logger.warning("reading the %s declarations failed: %s", group, error)


def declared(group: str, entry_point: metadata.EntryPoint) -> dict[str, Any]:
    """What ``entry_point`` of ``group`` declares, as its helper answered: {"kind": data}, {"provider": data} or
    {"environment": "module" | "class"}; raises DeclarationRefused when it cannot be read or is refused."""
    with _lock:
        answer = _read.get(_key(group, entry_point))
    if answer is None:
        answer = _read_one(group, entry_point)
    if "refused" in answer:
        raise DeclarationRefused(str(answer["refused"]), error=str(answer.get("error") or ""))
    if not any(key in answer for key in ("kind", "provider", "environment")):
        raise DeclarationRefused(f"its helper gave no declaration: {json.dumps(answer)[:200]}", error="malformed")
    return answer


def names_tool_environment(group: str, entry_point: metadata.EntryPoint) -> bool:
    """Whether ``entry_point`` names a tool environment (a module or a stateful class), by its helper's answer;
    False for a world provider or a malformed declaration (the world-provider registry refuses it). Raises
    DeclarationRefused when its package could not be imported."""
    try:
        return "environment" in declared(group, entry_point)
    except DeclarationRefused as refused:
        if refused.error == "malformed":
            return False
        raise


def forget() -> None:
    """Forget every declaration read (tests; a process that installed a package needs no more than its
    registries refreshed, since a new distribution version is a new key)."""
    with _lock:
        _read.clear()


def _fields(data: Any, types: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every field of ``types`` (field -> type or tuple of types) present with its type; raises
    DeclarationRefused naming the field."""
    if not isinstance(data, dict):
        raise DeclarationRefused(f"a declaration must be an object, not {type(data).__name__}", error="malformed")
    for key, expected in types.items():
        value = data.get(key, ...)
        allowed = expected if isinstance(expected, tuple) else (expected,)
        if value is ... or not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise DeclarationRefused(f"the declaration's {key!r} is missing or malformed", error="malformed")
    return data


def _in_helper(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("an installed plug-in's hooks run in its helper processes")


OPTIONAL = (dict, type(None))
KIND_FIELDS = {
    "name": str,
    "audit_task": bool,
    "page_context": bool,
    "audit_shows_detail": bool,
    "batchable": bool,
    "gameability": str,
    "page_fragment": str,
    "outside_source": OPTIONAL,
    "exports": OPTIONAL,
    "examples": list,
    "examples_unavailable": str,
    "check_seconds": (int, float),
    "version": str,
}


def kind_from(data: Any) -> VerifierKind:
    """The kind a helper's declaration describes, its hooks stand-ins (the registry makes them requests to the
    kind's helpers, engine/verifiers/plugin_kinds.py); raises DeclarationRefused. Still to be checked with
    ``kind_problems``."""
    fields = _fields(data, KIND_FIELDS)
    source, exports = fields["outside_source"], fields["exports"]
    if source is not None:
        _fields(source, {"field": str, "package": str})
        source = OutsideSource(field=source["field"], package=source["package"])
    if exports is not None:
        _fields(exports, {"package": str, "harbor": bool})
        exports = KindExports(package=exports["package"], harbor=_in_helper if exports["harbor"] else None)
    examples = tuple(
        KindExample(
            verifier=_fields(example, {"verifier": dict, "answer": (str, type(None))})["verifier"],
            passing=example.get("passing"),
            failing=example.get("failing"),
            answer=example["answer"],
            prompt=example.get("prompt"),
        )
        for example in fields["examples"]
    )
    return VerifierKind(
        name=fields["name"],
        parse_config=_in_helper,
        check=_in_helper,
        reference_completion=_in_helper,
        audit_failing_completions=_in_helper,
        audit_task=_in_helper if fields["audit_task"] else None,
        page_context=_in_helper if fields["page_context"] else None,
        audit_shows_detail=fields["audit_shows_detail"],
        batchable=fields["batchable"],
        gameability=fields["gameability"],
        page_fragment=fields["page_fragment"],
        outside_source=source,
        exports=exports,
        examples=examples,
        examples_unavailable=fields["examples_unavailable"],
        check_seconds=fields["check_seconds"],
        version=fields["version"],
    )


PROVIDER_FIELDS = {
    "name": str,
    "examples": list,
    "examples_unavailable": str,
    "description": str,
    "version": str,
    "remote": OPTIONAL,
}


def provider_from(data: Any) -> WorldProvider:
    """The provider a helper's declaration describes, ``claims``, ``prepare`` and ``list_tools`` stand-ins (the
    registry's isolating proxy replaces them, engine/worlds/isolated.py); raises DeclarationRefused. Still to be
    checked with ``provider_problems``."""
    fields = _fields(data, PROVIDER_FIELDS)
    remote = fields["remote"]
    if remote is not None:
        _fields(remote, {"label": str, "list_tools": bool})
        remote = RemoteProtocol(label=remote["label"], list_tools=_in_helper if remote["list_tools"] else None)
    examples = []
    for example in fields["examples"]:
        task = _fields(example, {"task": dict, "call": list})["task"]
        _fields(task, {"prompt": list, "tools": list, "verifier": dict})
        call = example["call"]
        if len(call) != 2 or not isinstance(call[0], str) or not isinstance(call[1], dict):
            raise DeclarationRefused("an example's call must be [tool name, arguments]", error="malformed")
        examples.append(
            ProviderExample(
                task=WorldTask(prompt=task["prompt"], tools=task["tools"], verifier=task["verifier"]),
                call=(call[0], call[1]),
            )
        )
    return WorldProvider(
        name=fields["name"],
        claims=_in_helper,
        prepare=_in_helper,
        examples=tuple(examples),
        examples_unavailable=fields["examples_unavailable"],
        description=fields["description"],
        version=fields["version"],
        remote=remote,
    )
