"""A stateful plug-in probed end to end through real Celery workers: the example `sheet` package
(tests/plugins/passband-example-sheet), a gym-style class holding a spreadsheet in memory, its tools using
pandas and texttable, one sandboxed process per episode. Installed the way a package is (a dist-info declaring its
class under the entry point group, on the workers' path). texttable is not Passband's: the sheet's lock pins it
with its hash, and the worker installs it on first use into a package environment of the plug-in's own, in its
own cache (another host's), from the wheel beside the example. The oracle passes every task, also the one where
its world crashes mid-episode (restarted from its seed, the earlier calls replayed) and the one whose tool renders
the sheet with texttable; the null policy passes none."""

import json

import pytest

from calibration.models import Rollout
from curation.services import environment_create
from engine.episodes import plugins
from tests.factories import import_tasks
from tests.support.plugin_packages import example_installed, offline_packages_env
from tests.support.server_campaigns import oracle_and_null_through_workers

pytestmark = pytest.mark.workers


@pytest.fixture
def sheet_installed(tmp_path, monkeypatch):
    """The example package's dist-info on a folder of its own, seen by this process and by the workers; the
    workers install its lock into a package cache of their own."""
    for name, value in offline_packages_env(tmp_path / "test-process-cache").items():
        monkeypatch.setenv(name, value)
    path = example_installed(monkeypatch, tmp_path, "passband-example-sheet", {"sheet": "passband_sheet:SheetWorld"})
    yield {"PYTHONPATH": path, **offline_packages_env(tmp_path / "worker-cache")}
    plugins.refresh()


def tool(name: str) -> dict:
    from passband_sheet import TOOL_SCHEMAS

    return next(schema for schema in TOOL_SCHEMAS if schema["function"]["name"] == name)


def sheet_task(key: str, prompt: str, *, seed: int, tools: tuple[str, ...], calls: list, checks: list) -> dict:
    return {
        "key": key,
        "prompt": [{"role": "user", "content": prompt}],
        "tools": [tool(name) for name in tools],
        "verifier": {"kind": "state_check", "environment": "sheet", "seed": seed, "checks": checks},
        "answer": json.dumps(calls),
    }


def set_cell(cell: str, value: float) -> dict:
    return {"name": "set_cell", "arguments": {"cell": cell, "value": value}}


def sheet_tasks() -> list[dict]:
    """Four tasks of the example package (importable once the fixture put it on the path)."""
    return [
        sheet_task(
            "sheet-set",
            "Set B1 to 42.",
            seed=3,
            tools=("get_cell", "set_cell"),
            calls=[set_cell("B1", 42)],
            checks=[{"table": "cells", "where": {"id": "B1"}, "expect": {"value": 42}}],
        ),
        sheet_task(
            "sheet-total",
            "Write the sum of column A into B1.",
            seed=5,  # A1..A3 hold 5, 10 and 7
            tools=("get_cell", "set_cell", "sum_column"),
            calls=[{"name": "sum_column", "arguments": {"column": "A"}}, set_cell("B1", 22)],
            checks=[
                {"table": "cells", "where": {"id": "B1"}, "expect": {"value": 22}},
                {"check": "at_least", "arguments": {"cell": "B1", "minimum": 22}},
            ],
        ),
        sheet_task(
            "sheet-render",
            "Render the sheet, then write how many cells it has into B1.",
            seed=4,
            tools=("render", "set_cell"),
            calls=[{"name": "render", "arguments": {}}, set_cell("B1", 3)],
            checks=[{"table": "cells", "where": {"id": "B1"}, "expect": {"value": 3}}],
        ),
        sheet_task(
            "sheet-crash",
            "Set C1 to 1 and C2 to 2.",
            seed=6,
            tools=("set_cell", "crash"),
            calls=[set_cell("C1", 1), set_cell("C2", 2)],
            checks=[
                {"table": "cells", "where": {"id": "C1"}, "expect": {"value": 1}},
                {"table": "cells", "where": {"id": "C2"}, "expect": {"value": 2}},
            ],
        ),
    ]


def oracle(tasks: list[dict]):
    """A model that makes the reference calls, one a turn (the test server's tokens are bytes, and a turn has
    200), with the world's process killed between the two calls of the crash task, then answers."""

    def respond(prompt_text, seed):
        task = next(task for task in tasks if task["prompt"][0]["content"] in prompt_text)
        calls = json.loads(task["answer"])
        if task["key"] == "sheet-crash":
            calls = [calls[0], {"name": "crash", "arguments": {}}, calls[1]]
        turn = prompt_text.count("<assistant>") - 1
        return f"<tool_call>{json.dumps(calls[turn])}</tool_call>" if turn < len(calls) else "Done."

    return respond


def null_policy(prompt_text, seed):
    return "I have done what you asked."


@pytest.mark.django_db(transaction=True)
def test_a_stateful_plugin_passes_the_oracle_fails_the_null_policy_and_survives_a_crash(
    alice, sheet_installed, tmp_path
):
    environment = environment_create(name="sheets", domain="workflow")
    tasks = sheet_tasks()
    report = import_tasks(environment, alice, *tasks, run_audits=True)
    assert report.ok and not report.audit_failures, report.summary()
    solved, _ = oracle_and_null_through_workers(
        environment,
        alice,
        tmp_path,
        oracle=oracle(tasks),
        null_policy=null_policy,
        tasks=len(tasks),
        extra_env=sheet_installed,
    )
    for rollout in Rollout.objects.filter(campaign=solved).select_related("task_version__task"):
        episode = rollout.episode
        assert episode["environment"] == "sheet" and episode["reset_ms"] > 0
        if rollout.task_version.task.key == "sheet-crash":
            # The crash was a tool_error the model saw; the restarted world kept C1, and C2 followed.
            assert episode["counts"]["tool_calls"] == 3 and episode["counts"]["tool_error"] == 1, episode["counts"]
            assert {"id": "C1", "value": 1} in episode["final_state"]["cells"]
        else:
            assert episode["counts"]["tool_calls"] == episode["counts"]["ok"]
        if rollout.task_version.task.key == "sheet-render":
            rendered = json.loads(observation(episode, "render"))
            assert "| A1   | 4     |" in rendered["table"], rendered
    # The worker installed the lock on its own host's cache, as it would on a host the test process never saw.
    installed = (tmp_path / "worker-cache" / "package-environments").glob("*/installed.json")
    assert [json.loads(record.read_text())["requirements"] for record in installed] == [["texttable==1.7.0"]]


def observation(episode: dict, tool: str) -> str:
    """What the model was shown for its first call of ``tool``."""
    return next(
        item["content"]
        for turn in episode["turns"]
        for item in turn.get("observations") or []
        if item.get("name") == tool
    )
