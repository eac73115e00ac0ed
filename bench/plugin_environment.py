"""Plug-in environment benchmark: tool calls/s and episodes/s through Passband's sandboxed world against the
plug-in's own functions called directly in this process.

For each installed plug-in named (the back office and the out-of-tree inventory by default), the same calls:
each task's reference solution from its task set, replayed call by call. Directly: `reset(seed)` and the tool
functions in this process (`LocalWorld`, no isolation). Through Passband: `SandboxedWorld`, what an episode
uses: one sandbox run per call (namespaces, rlimits, no network, an empty environment), the world's state
travelling as bytes between runs, and one run for the reset. An episode here is reset, the reference calls,
and the final state; the model's turns are left out, so this is the world's cost alone.

    .venv/bin/python bench/plugin_environment.py --episodes 20 --rounds 3

The per-call overhead is the sandbox's: a process started and isolated per call, by design (a tool that hangs
or eats memory is killed without harming the worker). Two episodes at a time (`--parallel 2`) show what the
2 cores give.

`--stateful` measures a stateful plug-in instead: the example `sheet` class (tests/plugins/passband-example-sheet,
its tools using pandas), directly (`LocalWorld`) against `StatefulWorld`, what its episodes use: one sandboxed
process per episode (started and reset once, outside the calls), each call a line to it and a line back.

    .venv/bin/python bench/plugin_environment.py --stateful --episodes 20 --rounds 3

`--reset` measures what a stateful episode waits for before the model is asked anything (`StatefulWorld.reset`:
its process started, the plug-in imported, reset from the seed) with the pool of pre-started processes
(engine/episodes/world_pool.py, `PASSBAND_WORLD_POOL=1`) against none (`0`), same run, arms alternating by round.
Episodes follow one another `--gap` seconds apart (what a model's turns give the next process to start).

    .venv/bin/python bench/plugin_environment.py --reset --episodes 20 --rounds 3 --gap 1

`--provider` measures an installed world provider: the example `lights` (tests/plugins/passband-example-world,
installed by `make install`), its declared object called directly in this process against the registry's
isolating proxy, what its episodes use (engine/worlds/isolated.py: the episode's world in a helper process of
its own, each call a line to it and a line back). An episode is the world opened, the toggles that switch every
lamp on and ten looks, and the final state. Episodes follow one another `--gap` seconds apart (what a model's
turns give the next episode's helper, started ahead as one is taken, to load).

    .venv/bin/python bench/plugin_environment.py --provider --episodes 20 --rounds 3 --gap 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.episodes import plugins, world_pool  # noqa: E402
from engine.episodes.stateful import StatefulWorld  # noqa: E402
from engine.episodes.world import LocalWorld, SandboxedWorld  # noqa: E402

SHEET = ROOT / "tests" / "plugins" / "passband-example-sheet"


def task_sets() -> dict[str, list[dict]]:
    from engine.episodes.backoffice_tasks import backoffice_tasks

    sets = {"backoffice": list(backoffice_tasks())}
    try:
        from passband_inventory.tasks import inventory_tasks
    except ImportError:
        print("passband-example-env is not installed (make install does it): the inventory world is skipped")
    else:
        sets["inventory"] = inventory_tasks()
    return sets


def stateful_task_sets() -> dict[str, list[dict]]:
    """Episodes of the example `sheet` class: ten cells written, read back, a column summed (pandas). The package
    is found through an entry point like an installed one (declared here when it is not installed); its lock's
    wheel is installed from beside it, as the suite does (tests/support/plugin_packages.py)."""
    os.environ.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(SHEET / "wheels"))
    sys.path.insert(0, str(SHEET))
    if "sheet" not in plugins.installed():
        point = metadata.EntryPoint(name="sheet", value="passband_sheet:SheetWorld", group=plugins.GROUP)
        found = plugins.discover_from([*metadata.entry_points(group=plugins.GROUP), point])
        plugins.discover = lambda: found  # type: ignore[assignment]  # what installing the package would give
    tasks = []
    for seed in range(4):
        calls = [{"name": "set_cell", "arguments": {"cell": f"B{row}", "value": row * seed}} for row in range(1, 11)]
        calls += [{"name": "get_cell", "arguments": {"cell": f"B{row}"}} for row in range(1, 11)]
        calls.append({"name": "sum_column", "arguments": {"column": "B"}})
        verifier = {"kind": "state_check", "environment": "sheet", "seed": seed}
        tasks.append({"key": f"sheet-{seed}", "verifier": verifier, "answer": json.dumps(calls)})
    return {"sheet": tasks}


def episode(world_class, task: dict) -> tuple[int, float, float]:
    """Reset, the reference calls one by one, the final state. Returns (tool calls, seconds in the calls,
    seconds in the reset and the final state)."""
    verifier = task["verifier"]
    started = time.perf_counter()
    world = world_class(environment=verifier["environment"], seed=int(verifier.get("seed", 0)))
    if hasattr(world, "reset"):
        world.reset()
    reset_s = time.perf_counter() - started
    calls = json.loads(task["answer"])
    started = time.perf_counter()
    for call in calls:
        result = world.call(call["name"], call["arguments"])
        assert result.status == "ok", (task["key"], call, result)
    calls_s = time.perf_counter() - started
    started = time.perf_counter()
    world.state()
    if hasattr(world, "close"):
        world.close()
    return len(calls), calls_s, reset_s + time.perf_counter() - started


def run(world_class, tasks: list[dict], episodes: int, parallel: int) -> tuple[float, float, float]:
    """(episodes/s, tool calls/s within the calls, ms per episode outside the calls: reset and final state)."""
    chosen = [tasks[index % len(tasks)] for index in range(episodes)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(lambda task: episode(world_class, task), chosen))
    elapsed = time.perf_counter() - started
    calls = sum(r[0] for r in results)
    calls_s = sum(r[1] for r in results) / parallel
    return episodes / elapsed, calls / calls_s, 1000 * sum(r[2] for r in results) / episodes


def reset_waits(episodes: int, *, pool: int, gap_s: float) -> list[float]:
    """ms each of ``episodes`` sheet episodes waited for its world (start and reset), ``gap_s`` apart, with a
    pool of ``pool`` pre-started processes (the first episode of an arm starts its own)."""
    os.environ["PASSBAND_WORLD_POOL"] = str(pool)
    world_pool.drain()
    waits = []
    for index in range(episodes):
        world = StatefulWorld(environment="sheet", seed=index % 4)
        waits.append(world.reset())
        world.close()
        time.sleep(gap_s)
    world_pool.drain()
    return waits


def reset_report(arguments: argparse.Namespace) -> None:
    stateful_task_sets()  # the sheet's entry point, as for --stateful
    reset_waits(1, pool=0, gap_s=0)  # warm: the bundled program is built once per process
    waits: dict[str, list[float]] = {"no pool": [], "pool of 1": []}
    for round_index in range(arguments.rounds):
        arms = ("no pool", "pool of 1") if round_index % 2 == 0 else ("pool of 1", "no pool")
        for arm in arms:
            pool = 0 if arm == "no pool" else 1
            waits[arm] += reset_waits(arguments.episodes, pool=pool, gap_s=arguments.gap)
    print(f"sheet: {arguments.rounds} rounds of {arguments.episodes} episodes per arm, {arguments.gap:g} s apart")
    for arm, values in waits.items():
        ordered = sorted(values)
        print(
            f"  {arm:9} start and reset: median {statistics.median(values):7.1f} ms, "
            f"90th percentile {ordered[int(0.9 * (len(ordered) - 1))]:7.1f} ms, most {ordered[-1]:7.1f} ms"
        )


def provider_episode(provider, task) -> tuple[int, float, float]:
    """One `lights` episode through ``provider``: (tool calls, seconds in the calls, seconds opening the world
    and reading the final state)."""
    from engine.worlds.provider import WorldOptions

    started = time.perf_counter()
    worlds = provider.prepare(task, WorldOptions())
    with worlds.episode(seed=1) as opened:
        opened_s = time.perf_counter() - started
        calls = [(toggle["name"], toggle["arguments"]) for toggle in task.verifier["toggles"]]
        calls += [("lights_look", {})] * 10
        started = time.perf_counter()
        for name, arguments in calls:
            result = opened.world.call(name, arguments)
            assert result.status == "ok", (name, result)
        calls_s = time.perf_counter() - started
        started = time.perf_counter()
        assert opened.world.state()["environment_reward"][0]["reward"] == 1.0
    return len(calls), calls_s, opened_s + time.perf_counter() - started


def provider_report(arguments: argparse.Namespace) -> None:
    try:
        import passband_lights
    except ImportError:
        sys.exit("passband-example-world is not installed (make install does it)")
    from engine.worlds.provider import WorldTask
    from engine.worlds.registry import provider_registry

    proxy = provider_registry().get("lights")
    assert proxy is not None and proxy.prepare is not passband_lights.prepare, "lights is not registered isolated"
    tasks = []
    for seed in range(4):
        raw = passband_lights.task(f"lights-{seed}", seed=seed)
        verifier = {**raw["verifier"], "toggles": json.loads(raw["answer"])}
        tasks.append(WorldTask(prompt=raw["prompt"], tools=raw["tools"], verifier=verifier))
    sides = {"direct": passband_lights.PROVIDER, "passband": proxy}
    rows: dict[str, list[tuple[float, float, float]]] = {"direct": [], "passband": []}
    provider_episode(proxy, tasks[0])  # warm: the pooled helper that answers prepare
    for round_index in range(arguments.rounds):
        for side in ("direct", "passband") if round_index % 2 == 0 else ("passband", "direct"):
            results = []
            for index in range(arguments.episodes):
                results.append(provider_episode(sides[side], tasks[index % 4]))
                time.sleep(arguments.gap)  # what a model's turns give the next episode's helper to start
            calls = sum(result[0] for result in results)
            rows[side].append(
                (calls / sum(result[1] for result in results), 1000 * statistics.mean(r[2] for r in results))
            )
    print(f"lights: {arguments.rounds} rounds of {arguments.episodes} episodes per side, {arguments.gap:g} s apart")
    median = {side: [statistics.median(row[i] for row in values) for i in range(2)] for side, values in rows.items()}
    for side, (calls_s, outside_ms) in median.items():
        print(
            f"  {side:9} median {calls_s:10.1f} tool calls/s {outside_ms:8.1f} ms to open the world and read its state"
        )
    direct, passband = median["direct"][0], median["passband"][0]
    print(f"  overhead per tool call: {1000 / passband - 1000 / direct:.3f} ms over the direct call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="Episodes per round and side.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=1, help="Episodes at a time (threads).")
    parser.add_argument("--stateful", action="store_true", help="The example stateful class, in its own process.")
    parser.add_argument("--reset", action="store_true", help="Start and reset of stateful episodes, pool or none.")
    parser.add_argument("--gap", type=float, default=1.0, help="With --reset or --provider: seconds between episodes.")
    parser.add_argument("--provider", action="store_true", help="The example installed world provider, isolated.")
    arguments = parser.parse_args()
    if arguments.provider:
        provider_report(arguments)
        return
    if arguments.reset:
        reset_report(arguments)
        return
    sandboxed = StatefulWorld if arguments.stateful else SandboxedWorld
    for name, tasks in (stateful_task_sets() if arguments.stateful else task_sets()).items():
        rows: dict[str, list[tuple[float, float, float]]] = {"direct": [], "passband": []}
        episode(sandboxed, tasks[0])  # warm: the bundled program is built once per process
        for round_index in range(arguments.rounds):
            order = ("direct", "passband") if round_index % 2 == 0 else ("passband", "direct")
            for side in order:
                world_class = LocalWorld if side == "direct" else sandboxed
                rows[side].append(run(world_class, tasks, arguments.episodes, arguments.parallel))
        median = {side: [statistics.median(v[i] for v in values) for i in range(3)] for side, values in rows.items()}
        print(f"{name}: {len(tasks)} tasks, {arguments.episodes} episodes a round, {arguments.parallel} at a time")
        for side, (episodes_s, calls_s, outside_ms) in median.items():
            print(
                f"  {side:9} median {episodes_s:8.1f} episodes/s {calls_s:8.1f} tool calls/s "
                f"{outside_ms:7.1f} ms reset + final state per episode "
                f"(calls/s by round: {', '.join(f'{v[1]:.1f}' for v in rows[side])})"
            )
        direct, passband = median["direct"][1], median["passband"][1]
        print(
            f"  overhead per tool call: {1000 / passband - 1000 / direct:.3f} ms "
            f"(Passband at {passband / direct:.1%} of the direct calls/s)"
        )


if __name__ == "__main__":
    main()
