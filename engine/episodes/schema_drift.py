"""A remote world whose tools changed since staff accepted them: what changed, named tool by tool.

A server restarted with a renamed argument would otherwise score right answers as wrong ones (the model
is offered the accepted tools, or calls the new ones with the task's old arguments). Calibration compares
the tools a session offers with the ones registered (or last accepted) before any model turn; a change
is an infrastructure outcome until staff accept the new schema (curation/server_schemas.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any


def _accepted_parameters(accepted: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {str(tool.get("name")): tool.get("parameters") for tool in accepted if not tool.get("hidden")}


def _offered_parameters(offered: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    functions = (schema.get("function") or {} for schema in offered)
    return {str(function.get("name")): function.get("parameters") for function in functions}


def tool_schema_changes(
    *, accepted: list[dict[str, Any]], offered: list[dict[str, Any]], allowed: tuple[str, ...] = ()
) -> list[str]:
    """How the tools a session offers (`offered`: OpenAI function schemas) differ from the `accepted` ones
    ({"name", "hidden", "parameters"}, as a registration check stores them); [] when they do not, or when
    nothing was accepted yet. `allowed`: the task's tools (empty: all), the only ones compared."""
    if not accepted:
        return []
    before = _accepted_parameters(accepted)
    now = _offered_parameters(offered)
    if allowed:
        before = {name: value for name, value in before.items() if name in allowed}
    changes = [f"tool {name} is gone" for name in sorted(set(before) - set(now))]
    changes += [f"tool {name} is new" for name in sorted(set(now) - set(before))]
    for name in sorted(set(before) & set(now)):
        if _canonical(before[name]) != _canonical(now[name]):
            changes.append(f"tool {name}: {_arguments_change(before[name], now[name])}")
    return changes


def _canonical(parameters: Any) -> str:
    return json.dumps(parameters or {}, sort_keys=True)


def _arguments_change(before: Any, now: Any) -> str:
    """The arguments removed and added, else "its argument schema changed"."""
    old = set(((before or {}).get("properties") or {}))
    new = set(((now or {}).get("properties") or {}))
    parts = []
    if old - new:
        parts.append(f"argument {', '.join(sorted(old - new))} removed")
    if new - old:
        parts.append(f"argument {', '.join(sorted(new - old))} added")
    return "; ".join(parts) or "its argument schema changed"
