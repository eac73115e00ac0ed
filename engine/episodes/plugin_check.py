"""Check an installed environment plug-in end to end: what `manage.py environments --check` runs.

Discovery already validated its declarations (engine.episodes.plugins); this runs it: a reset and a
snapshot in this process (JSON with exactly its TABLES), a dump/load round trip, and the same world
read inside the sandbox, which proves the package's source is self-contained enough to run there.
"""

from __future__ import annotations

import json
from typing import Any

from engine.episodes import plugins, world


def plugin_check(name: str, *, seed: int = 0, sandbox: Any = None) -> list[str]:
    """Problems found running plug-in `name` ([] when it works); raises plugins.UnknownEnvironment."""
    plugin = plugins.get(name)
    module = plugin.module
    try:
        state = module.snapshot(module.reset(seed))
        reloaded = module.snapshot(module.load(module.dump(module.reset(seed))))
    except Exception as error:  # noqa: BLE001 - plug-in code; the report says what broke
        return [f"reset/snapshot/dump/load raised {type(error).__name__}: {error}"]
    problems = []
    if not isinstance(state, dict) or set(state) != set(plugin.tables):
        tables = sorted(state) if isinstance(state, dict) else state
        problems.append(f"snapshot gave tables {tables!r}, TABLES says {list(plugin.tables)}")
    elif not all(isinstance(rows, list) and all(isinstance(row, dict) for row in rows) for rows in state.values()):
        problems.append("snapshot must give {table: [row objects]}")
    try:
        json.dumps(state, allow_nan=False)
    except (TypeError, ValueError) as error:
        problems.append(f"snapshot is not JSON: {error}")
    if reloaded != state:
        problems.append("load(dump(world)) is not the same world: the state would change between tool calls")
    if module.snapshot(module.reset(seed)) != state:
        problems.append(f"reset({seed}) twice gave different worlds: reset must be deterministic given the seed")
    try:
        sandboxed = world.SandboxedWorld(environment=name, seed=seed, sandbox=sandbox).state()
    except RuntimeError as error:
        problems.append(f"in the sandbox: {error}")
    else:
        if sandboxed != json.loads(json.dumps(state)):
            problems.append("the sandbox built a different world from the same seed")
    return problems
