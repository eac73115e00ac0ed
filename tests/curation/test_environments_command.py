"""manage.py environments: the installed plug-ins with their origin, tools and packages, the refused ones, and
every other registry (verifier kinds, world providers, export formats) with each one's origin; --install installs
a plug-in's own packages as a worker does on first use."""

import json
import os
import sys
from importlib import metadata
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from engine.episodes import plugins
from engine.sandbox import package_environments
from tests.engine.episodes.conftest import sheet, with_plugins  # noqa: F401 - the fixtures
from tests.support.plugin_packages import SHEET_WHEELS


def run(*arguments) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("environments", *arguments, stdout=out)
    except SystemExit as exit_:
        return int(exit_.code), out.getvalue()
    return 0, out.getvalue()


@pytest.mark.django_db
def test_lists_and_checks_the_installed_plugins():
    status, out = run("--check")
    assert status == 0
    assert "backoffice  (built-in, module engine.episodes.backoffice)" in out
    assert "inventory  (installed: passband-example-env 0.3.1, module passband_inventory)" in out
    assert "tools: find_items, get_order, adjust_stock, ship_order, move_item" in out
    assert "state checks: no_negative_stock, stock_moved" in out
    assert out.count("check: ok (reset, dump/load, the sandbox, the tasks' seeds: ") == 2


@pytest.mark.django_db
@pytest.mark.usefixtures("sheet")
def test_a_stateful_plugin_is_listed_with_its_class_and_checked_in_its_episode_process():
    status, out = run("--check", "sheet")
    assert status == 0, out
    assert (
        "sheet  (installed: unknown package, module passband_sheet, class SheetWorld: stateful, one process per episode)"
        in out
    )
    assert "check: ok (reset, its episode process, the sandbox, the tasks' seeds: none)" in out


def test_json_report_of_one_plugin():
    status, out = run("--json", "inventory")
    report = json.loads(out)
    assert status == 0 and [entry["name"] for entry in report["plugins"]] == ["inventory"]
    assert report["plugins"][0]["version"] == "0.3.1" and report["refused"] == []


def test_a_refused_plugin_is_reported_and_fails_the_command(monkeypatch):
    broken = metadata.EntryPoint(
        name="broken", value="tests.engine.episodes.broken_plugins.bad_schema", group=plugins.GROUP
    )
    found = plugins.discover_from([*metadata.entry_points(group=plugins.GROUP), broken])
    monkeypatch.setattr(plugins, "discover", lambda: found)
    status, out = run()
    assert status == 1
    assert "REFUSED broken  (entry point tests.engine.episodes.broken_plugins.bad_schema)" in out
    assert "tool 0 (add): function.parameters must be a JSON Schema object" in out
    assert "inventory  (installed: passband-example-env 0.3.1" in out  # the others are still listed


def test_an_unknown_name_lists_the_installed_ones():
    status, out = run("warehouse")
    assert status == 1
    assert (
        "UNKNOWN warehouse: unknown tool environment 'warehouse'; installed plug-ins: backoffice (passband 0.1.0), inventory (passband-example-env 0.3.1)"
        in out
    )


DRIFTING = """
import json

ENVIRONMENT = "drifting"
TABLES = ("items",)
TOOL_SCHEMAS = [{"type": "function", "function": {"name": "look", "description": "Look.",
                 "parameters": {"type": "object", "properties": {}}}}]


def look(world):
    return world


TOOLS = {"look": look}


def reset(seed):
    return {"seed": seed}


def snapshot(world):
    return {"items": [{"id": 1, "seed": world["seed"]}]}


def dump(world):
    return json.dumps(world).encode()


def load(data):
    return reset(99)  # not the world it was given: the state would change between tool calls
"""


@pytest.mark.django_db
def test_check_catches_a_world_that_changes_between_calls(tmp_path, monkeypatch):
    """The check runs the plug-in's functions in its sandbox (this process never imports it)."""
    (tmp_path / "passband_drifting.py").write_text(DRIFTING)
    monkeypatch.syspath_prepend(str(tmp_path))
    point = metadata.EntryPoint(name="drifting", value="passband_drifting", group=plugins.GROUP)
    found = plugins.discover_from([*metadata.entry_points(group=plugins.GROUP), point])
    monkeypatch.setattr(plugins, "discover", lambda: found)
    assert "drifting" in found.plugins, found.refused
    status, out = run("--check", "drifting")
    assert status == 1 and "load(dump(world)) is not the same world" in out
    assert "passband_drifting" not in sys.modules


@pytest.mark.django_db
def test_the_check_resets_the_tasks_own_seeds(alice, with_plugins):  # noqa: F811
    """A plug-in that resets from seed 0 but not from the seed a task names fails the check, naming the task."""
    from curation.models import TaskVersion
    from curation.services import environment_create
    from tests.factories import import_tasks

    with_plugins(counter="counter")
    environment = environment_create(name="counting", domain="workflow")
    task = {
        "key": "count-up",
        "prompt": "Add 1.",
        "answer": '[{"name": "add", "arguments": {"amount": 1}}]',
        "verifier": {
            "kind": "state_check",
            "environment": "counter",
            "seed": 2,
            "checks": [{"table": "counters", "where": {"id": 1}, "expect": {"value": 3}}],
        },
    }
    import_tasks(environment, alice, task)
    status, out = run("--check", "counter")
    assert status == 0 and "check: ok (reset, dump/load, the sandbox, the tasks' seeds: 2)" in out
    # A new release of the plug-in cannot reset from the task's seed any more.
    TaskVersion.objects.filter(task__key="count-up").update(verifier={**task["verifier"], "seed": 13})
    status, out = run("--check", "counter")
    assert status == 1 and "check: FAILED" in out
    assert "seed 13 (tasks count-up): environment counter could not reset from seed 13" in out


def test_every_registry_is_listed_with_each_ones_origin():
    status, out = run()
    assert status == 0, out
    lines = out.splitlines()
    for heading, builtin, installed in (
        (
            "Verifier kinds (entry point group passband.verifiers):",
            "exact  (built-in, engine.verifiers.kinds.exact)",
            "word_count  (installed: passband-example-verifier 0.1.0, passband_word_count:VERIFIER_KIND)",
        ),
        (
            "World providers (entry point group passband.environments):",
            "plugin  (built-in, engine.worlds.providers.plugin:PROVIDER)",
            "lights  (installed: passband-example-world 0.1.0, passband_lights:PROVIDER)",
        ),
        ("Export formats (entry point group passband.formats):", "native  (built-in, engine.formats.native)", None),
    ):
        assert heading in lines and f"  {builtin}" in lines, out
        assert installed is None or f"  {installed}" in lines, out
    report = json.loads(run("--json")[1])["registries"]
    assert {entry["name"]: entry["origin"] for entry in report["world providers"]["registered"]}["mcp"] == "built-in"
    assert [entry["name"] for entry in report["export formats"]["registered"]][:4] == [
        "native",
        "trl",
        "verifiers",
        "nemo_gym",
    ]


def test_install_puts_a_plugins_own_packages_on_this_host_and_a_failure_fails_the_command(sheet, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PIP_FIND_LINKS", str(Path(os.environ["PASSBAND_CACHE_DIR"]) / "no-wheels-here"))
    monkeypatch.setenv("PASSBAND_CACHE_DIR", os.environ["PASSBAND_CACHE_DIR"] + "-install-command")
    status, out = run("sheet")
    assert status == 0
    assert "  dependencies (installed beside Passband): pandas" in out
    lock = f"requirements.lock, lock sha256 {sheet.lock.sha256[:12]}"
    assert (
        f"  own packages ({lock}): texttable==1.7.0: not installed on this host yet (a worker installs it "
        "on first use; --install)" in out
    )
    assert "    texttable==1.7.0  sha256 72227d592c82" in out.splitlines()  # the wheel's hash, as the lock pins it
    packages = json.loads(run("--json", "sheet")[1])["plugins"][0]["packages"]["lock"]["packages"]
    assert packages == [{"name": "texttable", "version": "1.7.0", "hashes": ["72227d592c82"]}]
    status, out = run("--install", "sheet")
    assert status == 1 and "  install: FAILED: pip could not install requirements.lock (texttable==1.7.0): " in out
    assert package_environments.installed_site(sheet.lock) is None
    monkeypatch.setenv("PIP_FIND_LINKS", str(SHEET_WHEELS))
    status, out = run("--install", "sheet")
    site = package_environments.installed_site(sheet.lock)
    assert status == 0 and site is not None and f"  own packages ({lock}): texttable==1.7.0: {site}" in out


@pytest.mark.django_db
def test_the_check_resets_a_stateful_plugin_from_the_tasks_seeds_in_its_episode_process(alice, sheet):  # noqa: F811
    from curation.models import TaskVersion
    from curation.services import environment_create
    from tests.factories import import_tasks

    task = {
        "key": "sheet-b1",
        "prompt": "Set B1 to 1.",
        "answer": '[{"name": "set_cell", "arguments": {"cell": "B1", "value": 1}}]',
        "tools": [schema for schema in sheet.tool_schemas if schema["function"]["name"] == "set_cell"],
        "verifier": {
            "kind": "state_check",
            "environment": "sheet",
            "seed": 2,
            "checks": [{"table": "cells", "where": {"id": "B1"}, "expect": {"value": 1}}],
        },
    }
    import_tasks(environment_create(name="sheets", domain="workflow"), alice, task)
    status, out = run("--check", "sheet")
    assert status == 0 and "check: ok (reset, its episode process, the sandbox, the tasks' seeds: 2)" in out, out
    TaskVersion.objects.filter(task__key="sheet-b1").update(verifier={**task["verifier"], "seed": 13})
    status, out = run("--check", "sheet")
    assert (
        status == 1
        and (
            "seed 13 (tasks sheet-b1): environment sheet could not reset from seed 13: RuntimeError: no sheet for seed 13"
        )
        in out
    ), out
