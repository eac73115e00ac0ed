"""Check an installed environment plug-in end to end: what `manage.py environments --check` runs.

Discovery already validated its declarations (engine.episodes.plugins); this installs its own packages when
it declares a lock and this host lacks them (engine/episodes/plugin_packages.py), then runs it, in its sandbox
(this process never imports it): a reset and a snapshot (JSON with exactly its TABLES), a dump/load round trip, a
second reset from the same seed, and the same world read in another sandbox run;
then a reset in the sandbox from every seed the tasks name (`plugin_seeds_check`), since a world that
resets from seed 0 may still fail from the one a task uses.
"""

from __future__ import annotations

import json
from typing import Any

from engine.episodes import plugin_packages, plugins, world


def plugin_check(name: str, *, seed: int = 0, sandbox: Any = None) -> list[str]:
    """Problems found running plug-in `name` ([] when it works); raises plugins.UnknownEnvironment."""
    plugin = plugins.get(name)
    try:
        plugin_packages.install(plugin)  # its own packages (REQUIREMENTS), installed here when they are not yet
    except plugin_packages.InstallFailed as error:
        return [f"its packages: {error}"]
    checked = world.SandboxedWorld(environment=name, seed=seed, sandbox=sandbox)
    reply, result = checked._run({"self_check": True})
    if reply is None:
        return [f"in the sandbox: {json.loads(result.content).get('error', result.status) if result else ''}"]
    if "error" in reply:
        return [str(reply["error"])]
    state, problems = reply.get("state"), []
    if reply.get("tables") != sorted(plugin.tables):
        problems.append(f"snapshot gave tables {reply.get('tables')!r}, TABLES says {list(plugin.tables)}")
    elif not reply.get("rows"):
        problems.append("snapshot must give {table: [row objects]}")
    if reply.get("not_json"):
        problems.append(f"snapshot is not JSON: {reply['not_json']}")
    if not reply.get("same", {}).get("reloaded"):
        problems.append("load(dump(world)) is not the same world: the state would change between tool calls")
    if not reply.get("same", {}).get("again"):
        problems.append(f"reset({seed}) twice gave different worlds: reset must be deterministic given the seed")
    try:
        sandboxed = world.SandboxedWorld(environment=name, seed=seed, sandbox=sandbox).state()
    except RuntimeError as error:
        problems.append(f"in the sandbox: {error}")
    else:
        if sandboxed != state:
            problems.append("the sandbox built a different world from the same seed")
    if plugin.stateful:
        problems.extend(_session_check(name, seed=seed, state=state, sandbox=sandbox))
    return problems


def _session_check(name: str, *, seed: int, state: Any, sandbox: Any) -> list[str]:
    """A stateful plug-in's episode process: started, reset from `seed` and read back like an episode's."""
    from engine.episodes.stateful import StatefulWorld

    session = StatefulWorld(environment=name, seed=seed, sandbox=sandbox)
    try:
        session.reset()
        if session.state() != json.loads(json.dumps(state)):
            return ["its episode process built a different world from the same seed"]
    except (world.WorldResetError, RuntimeError) as error:
        return [f"in its episode process: {error}"]
    finally:
        session.close()
    return []


def plugin_seeds_check(name: str, *, seeds: dict[int, list[str]], sandbox: Any = None) -> list[str]:
    """Reset plug-in `name` from each of the tasks' own seeds (seed -> the tasks' keys), in the sandbox as
    rollouts do (a stateful class in its episode process, within its RESET_SECONDS); one problem per seed that
    cannot, naming its tasks ([] when every seed resets)."""
    from engine.episodes.stateful import StatefulWorld

    world_class = StatefulWorld if plugins.get(name).stateful else world.SandboxedWorld
    problems = []
    for seed, keys in sorted(seeds.items()):
        checked = world_class(environment=name, seed=seed, sandbox=sandbox)
        try:
            checked.reset()
        except world.WorldResetError as error:
            named = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
            problems.append(f"seed {seed} (tasks {named}): {error}")
        finally:
            getattr(checked, "close", lambda: None)()
    return problems
