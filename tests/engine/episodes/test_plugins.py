"""Environment plug-ins: discovered through their entry points, validated, refused with a reason."""

import json
import socket
from pathlib import Path

import pytest

from engine.episodes import plugins, world
from engine.episodes.world import LocalWorld, SandboxedWorld
from engine.sandbox import default_sandbox
from engine.verifiers import VerifierConfigError, audit, validate_config, verify

ROOT = Path(__file__).resolve().parents[3]


def test_installed_plugins_are_discovered_with_their_origin():
    found = plugins.discover()
    assert found.refused == ()
    backoffice, inventory = found.plugins["backoffice"], found.plugins["inventory"]
    assert (backoffice.distribution, backoffice.module_name) == ("passband", "engine.episodes.backoffice")
    assert (inventory.distribution, inventory.version, inventory.module_name) == (
        "passband-example-env",
        "0.3.1",
        "passband_inventory",
    )
    assert "update_record" in backoffice.tool_names and "ship_order" in inventory.tool_names
    assert inventory.state_checks == ("no_negative_stock", "stock_moved")
    # The example is an installed distribution, imported from site-packages, not from its source folder.
    module_file = Path(inventory.module.__file__).resolve()
    assert "site-packages" in module_file.parts
    assert not module_file.is_relative_to(ROOT / "tests" / "plugins")


def test_the_out_of_tree_world_runs_in_the_sandbox_like_in_process():
    calls = [
        ("adjust_stock", {"sku": "SKU-101", "delta": 40, "reason": "delivery"}),
        ("ship_order", {"id": 1}),
        ("move_item", {"sku": "SKU-102", "bin": "Z9"}),  # not a bin: bad_arguments
        ("ship_order", {"id": 1}),  # already shipped: bad_arguments
        ("teleport", {}),
        ("get_order", {"id": 1, "extra": True}),
    ]
    local = LocalWorld(environment="inventory", seed=11)
    sandboxed = SandboxedWorld(environment="inventory", seed=11)
    statuses = []
    for name, arguments in calls:
        local_result, sandboxed_result = local.call(name, arguments), sandboxed.call(name, arguments)
        assert local_result.status == sandboxed_result.status
        assert local_result.content == sandboxed_result.content
        statuses.append(sandboxed_result.status)
    assert statuses == ["ok", "ok", "bad_arguments", "bad_arguments", "unknown_tool", "bad_arguments"]
    assert sandboxed.state() == local.state()
    assert sandboxed.state()["movements"][0] == {"id": 1, "sku": "SKU-101", "delta": 40, "reason": "delivery"}


def test_tool_schemas_come_from_the_plugin():
    assert [schema["function"]["name"] for schema in world.tool_schemas("inventory")] == [
        "find_items",
        "get_order",
        "adjust_stock",
        "ship_order",
        "move_item",
    ]


def test_the_example_tasks_pass_their_audits_and_doing_nothing_fails():
    from passband_inventory.tasks import inventory_tasks

    tasks = inventory_tasks()
    assert len(tasks) == 6
    for task in tasks:
        assert audit(verifier=task["verifier"], answer=task["answer"]) == [], task["key"]
        assert verify(verifier=task["verifier"], completion="").outcome == "fail"


def test_plugin_state_checks_judge_the_final_state():
    verifier = {
        "kind": "state_check",
        "environment": "inventory",
        "seed": 11,
        "checks": [{"check": "stock_moved", "arguments": {"sku": "SKU-101", "delta": 5}}],
    }
    booked = [{"name": "adjust_stock", "arguments": {"sku": "SKU-101", "delta": 5, "reason": "found"}}]
    assert verify(verifier=verifier, completion=json.dumps(booked)).outcome == "pass"
    twice = verify(verifier=verifier, completion=json.dumps(booked * 2))
    assert twice.outcome == "fail" and "2 movements of +5 for SKU-101" in twice.detail
    with pytest.raises(VerifierConfigError) as error:
        validate_config({**verifier, "checks": [{"check": "stock_exact"}]})
    assert error.value.field == "checks[0]" and "no_negative_stock, stock_moved" in str(error.value)


def test_a_crashing_plugin_check_is_an_error_not_a_wrong_answer(with_plugins):
    with_plugins(counter="counter")
    verifier = {"kind": "state_check", "environment": "counter", "seed": 1, "checks": [{"check": "broken"}]}
    verdict = verify(verifier=verifier, completion=json.dumps([{"name": "add", "arguments": {"amount": 2}}]))
    assert verdict.outcome == "error" and verdict.reward is None
    assert "check broken crashed: KeyError" in verdict.detail


def test_an_unknown_environment_lists_the_installed_plugins():
    with pytest.raises(VerifierConfigError) as error:
        validate_config({"kind": "state_check", "environment": "warehouse", "seed": 1, "checks": [{"unchanged": []}]})
    message = str(error.value)
    assert error.value.field == "environment"
    assert "unknown tool environment 'warehouse'" in message
    assert "backoffice (passband 0.1.0)" in message and "inventory (passband-example-env 0.3.1)" in message
    assert "passband.environments" in message
    with pytest.raises(KeyError, match="installed plug-ins"):
        world.environment_module("warehouse")


@pytest.mark.parametrize(
    "module, expected",
    [
        ("bad_schema", "invalid tool schema: tool 0 (add): function.parameters must be a JSON Schema object"),
        ("bad_json_schema", "function.parameters is not a valid JSON Schema at properties/amount/type"),
        (
            "unknown_tool",
            "TOOL_SCHEMAS names add, spin, look_around, which TOOLS does not implement (TOOLS has subtract)",
        ),
        ("duplicate_tools", "tool 3 (add): the name is already used by tool 0; tool names must be unique"),
        ("imports_httpx", "must be self-contained"),
        ("no_reset", "lacks reset"),
        ("missing_module", "importing tests.engine.episodes.broken_plugins.missing_module failed: ModuleNotFoundError"),
    ],
)
def test_broken_plugins_are_refused_with_what_to_fix(with_plugins, module, expected):
    found = with_plugins(broken=module)
    assert "broken" not in found.plugins
    [refused] = found.refused
    assert refused.name == "broken" and expected in refused.error
    # The rest still work, and naming the refused one says why it is refused.
    assert {"backoffice", "inventory"} <= set(found.plugins)
    with pytest.raises(VerifierConfigError) as error:
        validate_config({"kind": "state_check", "environment": "broken", "seed": 1, "checks": [{"unchanged": []}]})
    assert "installed but refused" in str(error.value) and expected in str(error.value)


def test_the_self_contained_rule_names_the_file_and_line(with_plugins):
    [refused] = with_plugins(broken="imports_httpx").refused
    assert "imports_httpx.py:5) imports httpx" in refused.error


def test_two_plugins_cannot_claim_one_name(with_plugins):
    found = with_plugins(inventory="counter")
    assert found.plugins["inventory"].distribution == "passband-example-env"
    assert [item.error for item in found.refused] == [
        "environment 'inventory' is already declared by passband-example-env"
    ]


def test_replayed_calls_run_in_the_sandbox_under_its_time_limit(with_plugins):
    with_plugins(counter="counter")
    # In this process the tool would never return; in the sandbox it is killed at the limit.
    with pytest.raises(world.ReplayTimeout):
        world.replay_state(environment="counter", seed=0, calls=[{"name": "spin", "arguments": {}}], seconds=1)
    result = SandboxedWorld(environment="counter", seed=0, tool_seconds=1).call("spin", {})
    assert result.status == "timeout"


def test_a_tool_sees_no_network_and_none_of_the_workers_environment(with_plugins, monkeypatch):
    with_plugins(counter="counter")
    monkeypatch.setenv("PASSBAND_TEST_SECRET", "s3cret")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        local = json.loads(LocalWorld(environment="counter", seed=0).call("look_around", {"port": port}).content)
        assert local["connected"] and "PASSBAND_TEST_SECRET" in local["environment"]  # the probe works here
        if default_sandbox().isolation()["mode"] != "namespaces":
            pytest.skip("the sandbox runs without namespaces here: it has no network namespace to prove")
        result = SandboxedWorld(environment="counter", seed=0).call("look_around", {"port": port})
    seen = json.loads(result.content)
    assert result.status == "ok" and seen["connected"] is False
    assert "PASSBAND_TEST_SECRET" not in seen["environment"] and "DATABASE_URL" not in seen["environment"]


def test_a_world_is_reset_in_the_sandbox_before_the_model_acts_and_its_latency_kept(with_plugins):
    with_plugins(counter="counter")
    sandboxed = SandboxedWorld(environment="counter", seed=2)
    assert sandboxed.reset_ms is None
    elapsed = sandboxed.reset()
    assert elapsed > 0 and sandboxed.reset_ms == elapsed
    # The call continues from the reset world (seed 2), not from a fresh one.
    assert json.loads(sandboxed.call("add", {"amount": 3}).content) == {"value": 5}


def test_a_reset_that_crashes_or_hangs_is_the_worlds_failure_with_its_reason(with_plugins):
    with_plugins(counter="counter")
    with pytest.raises(world.WorldResetError, match=r"counter could not reset from seed 13: .*no world for seed 13"):
        SandboxedWorld(environment="counter", seed=13).reset()
    with pytest.raises(world.WorldResetError, match="counter could not reset from seed 14: the tool timed out"):
        SandboxedWorld(environment="counter", seed=14, tool_seconds=1).reset()


def test_a_hostile_tool_environment_is_never_imported_here(monkeypatch):
    """A plug-in whose import reads SECRET_KEY, writes a marker and marks the importing interpreter is discovered,
    checked and run without its package ever being imported in this process: its declaration is read in a
    locked-down helper, its functions (reset, tools, snapshot, STATE_CHECKS) run in its sandbox."""
    import builtins
    import os
    import sys
    from importlib import metadata

    from engine import declarations
    from tests.support.hostile_environment_names import HOSTILE_TOOL_ENVIRONMENT as HOSTILE
    from tests.support.hostile_environment_names import TOOL_MARK, TOOL_MARKER

    if os.path.exists(TOOL_MARKER):
        os.remove(TOOL_MARKER)
    declarations.forget()
    point = metadata.EntryPoint(name="hostile-tool-env", value=HOSTILE, group=plugins.GROUP)
    found = plugins.discover_from([*metadata.entry_points(group=plugins.GROUP), point])
    monkeypatch.setattr(plugins, "discover", lambda: found)
    plugin = found.plugins["hostile-tool-env"]
    assert (plugin.tool_names, plugin.tables, plugin.state_checks) == (
        ("tool_environment_report",),
        ("reports",),
        ("reported",),
    )
    assert world.initial_state(environment="hostile-tool-env", seed=1) == {"reports": []}
    sandboxed = SandboxedWorld(environment="hostile-tool-env", seed=1)
    report = json.loads(sandboxed.call("tool_environment_report", {}).content)
    assert report["secret_key"] == ""  # where it ran, its sandbox, there is no secret to read
    state = sandboxed.state()
    assert world.run_state_check(environment="hostile-tool-env", check="reported", state=state, arguments={}) is None
    verdict = verify(
        verifier={
            "kind": "state_check",
            "environment": "hostile-tool-env",
            "seed": 1,
            "checks": [{"check": "reported"}],
        },
        completion=json.dumps([{"name": "tool_environment_report", "arguments": {}}]),
    )
    assert verdict.outcome == "pass", verdict.detail
    from engine.episodes.plugin_check import plugin_check

    assert plugin_check("hostile-tool-env") == []
    assert HOSTILE not in sys.modules and not hasattr(builtins, TOOL_MARK)
    assert not os.path.exists(TOOL_MARKER)
