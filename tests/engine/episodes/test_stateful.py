"""Stateful plug-ins (engine/episodes/stateful.py) with the example `sheet` package (tests/plugins/
passband-example-sheet), a gym-style class whose world lives in one sandboxed process per episode: discovery,
the same observations as the direct calls, a crash mid-episode, a reset that raises or hangs, the memory
limit, and what its process can see. The real fork server throughout."""

import json
import os
from pathlib import Path

import pytest

from engine.episodes import plugin_check, plugins, world_pool
from engine.episodes.stateful import StatefulWorld, plugin_from_class
from engine.episodes.world import LocalWorld, WorldResetError, replay_state
from engine.sandbox.view import SandboxView, sandbox_for
from engine.worlds.provider import WorldFailed, WorldOptions, WorldTask
from engine.worlds.providers import plugin as plugin_provider

ROOT = Path(__file__).resolve().parents[3]


def observed(result):
    return result.status, json.loads(result.content)


def test_a_class_under_the_entry_point_is_a_stateful_plugin_with_its_dependencies(sheet):
    assert sheet.stateful and sheet.attribute == "SheetWorld" and sheet.module_name == "passband_sheet"
    assert sheet.dependencies == ("pandas",)
    assert sheet.tool_names[:3] == ("get_cell", "set_cell", "sum_column") and sheet.tables == ("cells",)
    assert plugin_check.plugin_check("sheet") == []


def test_a_class_that_lacks_a_tool_method_or_a_sane_memory_limit_is_refused():
    class NoTool:
        TOOL_SCHEMAS = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]
        TABLES = ("things",)

        def reset(self, seed):
            pass

        def snapshot(self):
            return {"things": []}

    with pytest.raises(plugins.PluginError, match="TOOL_SCHEMAS names look, which .*NoTool has no method"):
        plugin_from_class(NoTool, name="no-tool")
    NoTool.look = lambda self: {}
    NoTool.MEMORY_MB = -1
    with pytest.raises(plugins.PluginError, match="MEMORY_MB must be a number above 0"):
        plugin_from_class(NoTool, name="no-tool")
    del NoTool.snapshot
    with pytest.raises(plugins.PluginError, match="lacks the method snapshot"):
        plugin_from_class(NoTool, name="no-tool")


def test_the_world_keeps_its_state_in_its_process_and_answers_as_the_direct_calls(sheet):
    calls = [
        ("set_cell", {"cell": "B1", "value": 5}),
        ("sum_column", {"column": "A"}),
        ("get_cell", {"cell": "b1"}),
        ("set_cell", {"cell": "nope", "value": 1}),
        ("get_cell", {}),
    ]
    direct = LocalWorld(environment="sheet", seed=3)
    world = StatefulWorld(environment="sheet", seed=3)
    try:
        world.reset()
        for name, arguments in calls:
            assert observed(world.call(name, arguments)) == observed(direct.call(name, arguments))
        assert world.state() == direct.state()
    finally:
        world.close()
    assert observed(direct.call("sum_column", {"column": "A"})) == ("ok", {"column": "A", "sum": 16.0})
    # An audit's replay of a reference answer: one sandbox run, reset and the calls, no session.
    replayed = replay_state(environment="sheet", seed=3, calls=[{"name": name, "arguments": a} for name, a in calls])
    assert replayed == direct.state()


def test_a_crash_mid_episode_restarts_the_world_from_its_seed_with_the_earlier_calls(sheet):
    world = StatefulWorld(environment="sheet", seed=4)
    try:
        world.reset()
        assert world.call("set_cell", {"cell": "B1", "value": 9}).status == "ok"
        status, content = observed(world.call("crash", {}))
        assert (
            status == "tool_error"
            and "exit code 3" in content["error"]
            and "restarted from its seed" in content["error"]
        )
        # The restarted world holds what the model did before the crash, and goes on answering.
        assert world.call("get_cell", {"cell": "B1"}).content == json.dumps({"cell": "B1", "value": 9}, sort_keys=True)
        assert {"id": "B1", "value": 9} in world.state()["cells"]
        assert world.call("crash", {}).status == "tool_error"
        # A world that keeps dying ends the episode as the world's failure, never as an answer.
        with pytest.raises(WorldFailed, match="world sheet: its process died .*3 times in one episode"):
            world.call("crash", {})
    finally:
        world.close()


def test_a_reset_that_raises_or_hangs_is_the_worlds_failure_in_bounded_time(sheet, monkeypatch):
    with pytest.raises(WorldResetError, match="could not reset from seed 13: RuntimeError: no sheet for seed 13"):
        StatefulWorld(environment="sheet", seed=13).reset()
    monkeypatch.setattr(sheet.module.environment_class, "RESET_SECONDS", 1)
    with pytest.raises(WorldResetError, match="seed 14: start and reset took longer than 1 s"):
        StatefulWorld(environment="sheet", seed=14).reset()
    # Through the provider: tried the bounded number of times, then the task's outcome for the batch.
    task = WorldTask(
        prompt=[{"role": "user", "content": "Set B1 to 1."}],
        tools=[schema for schema in sheet.tool_schemas if schema["function"]["name"] == "set_cell"],
        verifier={"kind": "state_check", "environment": "sheet", "seed": 14, "checks": []},
    )
    worlds = plugin_provider.prepare(task, WorldOptions(reset_tries=2))
    with pytest.raises(WorldFailed, match="world sheet: .*took longer than 1 s \\(tried 2 times\\)"):
        with worlds.episode(seed=0):
            pass


def test_a_call_past_its_time_is_a_timeout_and_ends_the_worlds_process(sheet):
    world = StatefulWorld(environment="sheet", seed=2, tool_seconds=1)
    try:
        world.reset()
        assert observed(world.call("stall", {})) == ("timeout", {"error": "the tool timed out"})
        with pytest.raises(RuntimeError, match="could not read the world's state"):
            world.state()
    finally:
        world.close()


def test_the_memory_limit_holds_and_the_world_survives_a_tool_that_hits_it(sheet):
    world = StatefulWorld(environment="sheet", seed=2)
    try:
        world.reset()
        assert observed(world.call("hog", {})) == ("tool_error", {"error": "MemoryError"})
        assert world.call("get_cell", {"cell": "A1"}).status == "ok" and world.restarts == 0
    finally:
        world.close()


def test_the_worlds_process_cannot_read_passbands_files_environment_or_packages(sheet):
    if sandbox_for(SandboxView.of(distributions=("pandas",))).isolation()["mode"] != "namespaces":
        pytest.skip("the sandbox runs without namespaces here: its filesystem view is not a boundary")
    settings_file = ROOT / "passband" / "settings.py"
    assert settings_file.exists() and os.environ.get("SECRET_KEY")
    world = StatefulWorld(environment="sheet", seed=2)
    try:
        world.reset()
        status, seen = observed(world.call("peek", {"path": str(settings_file)}))
    finally:
        world.close()
    assert status == "ok" and seen["text"] == "FileNotFoundError"
    assert "SECRET_KEY" not in seen["environment"] and "DATABASE_URL" not in seen["environment"]
    assert all(value.startswith("ImportError") for value in seen["imports"].values()), seen["imports"]


def test_an_episode_takes_a_pre_started_process_and_one_that_died_waiting_is_replaced(sheet, monkeypatch):
    monkeypatch.setenv("PASSBAND_WORLD_POOL", "1")
    world_pool.drain()
    first, second, third = (StatefulWorld(environment="sheet", seed=seed) for seed in (2, 3, 4))
    try:
        first.reset()  # the environment's first episode starts its own, and one for the next
        second.reset()
        assert not first.pooled and second.pooled
        assert observed(second.call("get_cell", {"cell": "A1"})) == ("ok", {"cell": "A1", "value": 3})
        for waiting in world_pool._idle.values():  # the idle process dies before the next episode takes it
            for _, session in waiting:
                session.close()
        third.reset()
        assert not third.pooled and observed(third.call("get_cell", {"cell": "A1"}))[1]["value"] == 4
    finally:
        for world in (first, second, third):
            world.close()
        world_pool.drain()
    monkeypatch.setenv("PASSBAND_WORLD_POOL", "0")
    alone = StatefulWorld(environment="sheet", seed=2)
    try:
        alone.reset()
        assert not alone.pooled and world_pool._idle == {}  # the pool is off: nothing started ahead
    finally:
        alone.close()
