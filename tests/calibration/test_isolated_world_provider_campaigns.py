"""An installed world provider's worlds run out of the worker's process, through a real Celery worker: the
hostile provider of tests/support/hostile_worlds.py, declared by a dist-info on a folder of its own as installing
its package would, is probed by a scripted model. From inside the episode its tools cannot write a file
outside, open a socket to the broker or read the worker's secrets (its environment, its /proc entry); a world
whose process dies mid-episode is the world's outcome, never the model's."""

import json
import os
from pathlib import Path

import pytest
from django.conf import settings

from calibration.models import Calibration, Outcome, Rollout
from curation.services import environment_create
from engine.worlds import registry as worlds
from tests.calibration.scripted import observed_tools, probe_through_a_worker
from tests.factories import import_tasks
from tests.support import hostile_worlds
from tests.support.workers import flush_broker, running_worker, test_database_url

pytestmark = pytest.mark.workers

ROOT = Path(__file__).resolve().parents[2]
ESCAPES = ["hostile_write", "hostile_socket", "hostile_secrets", "hostile_count"]


@pytest.fixture
def hostile_installed(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "passband_hostile_world-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: passband-hostile-world\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[{worlds.GROUP}]\nhostile = tests.support.hostile_worlds:PROVIDER\n")
    monkeypatch.syspath_prepend(str(site))
    worlds.refresh()
    if os.path.exists(hostile_worlds.MARKER):
        os.remove(hostile_worlds.MARKER)
    yield {"PYTHONPATH": f"{site}:{ROOT}"}
    worlds.refresh()


def hostile_task(key: str, calls: list[str]) -> dict:
    schemas = [schema for schema in hostile_worlds.TOOL_SCHEMAS if schema["function"]["name"] in calls]
    return {
        "key": key,
        "prompt": [{"role": "user", "content": f"[{key}] Count once, then say done."}],
        "answer": json.dumps([{"name": name, "arguments": {}} for name in calls]),
        "tools": schemas,
        "verifier": {"kind": "episode_reward", "reward": "environment", "seed": 1},
    }


@pytest.mark.django_db(transaction=True)
def test_a_hostile_installed_world_cannot_reach_the_worker_and_its_crash_is_the_worlds(hostile_installed, alice):
    tasks = [hostile_task("escape", ESCAPES), hostile_task("crash", ["hostile_count", "hostile_crash"])]
    solutions = {task["key"]: json.loads(task["answer"]) for task in tasks}

    def policy(prompt_text, seed):
        if prompt_text.count("<assistant>") > 1:
            return "Done."
        key = next(key for key in solutions if f"[{key}]" in prompt_text)
        return "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in solutions[key])

    environment = environment_create(name="hostile-tasks", domain="workflow")
    assert import_tasks(environment, alice, *tasks).ok
    flush_broker()
    with running_worker(queues="default,generate,verify", concurrency=1, extra_env=hostile_installed):
        _, campaign = probe_through_a_worker(
            environment, alice, policy, "hostile", rollouts=2, tool_parser=True, max_new_tokens=1000
        )

    by_task: dict[str, list[Rollout]] = {}
    for rollout in Rollout.objects.filter(campaign=campaign).select_related("task_version__task"):
        by_task.setdefault(rollout.task_version.task.key, []).append(rollout)
    assert sorted(by_task) == ["crash", "escape"] and all(len(rollouts) == 2 for rollouts in by_task.values())

    secrets = [settings.SECRET_KEY, test_database_url(), settings.CELERY_BROKER_URL]
    for rollout in by_task["escape"]:
        assert rollout.outcome == Outcome.PASS, rollout.detail  # the world itself still works
        observed = observed_tools(rollout)
        assert observed["hostile_write"].startswith("refused: Forbidden: writing files")
        assert observed["hostile_socket"].startswith("refused: Forbidden: socket")
        assert "refused: Forbidden: reading another process's /proc" in observed["hostile_secrets"]
        assert not [secret for secret in secrets if secret in json.dumps(rollout.episode)]
    assert not os.path.exists(hostile_worlds.MARKER)

    for rollout in by_task["crash"]:
        assert rollout.outcome == Outcome.WORLD_ERROR and rollout.reward is None
        assert "its helper process died during hostile_crash" in rollout.detail
    crash_calibration = Calibration.objects.get(task_version__task__key="crash", probe_model__name="hostile")
    assert crash_calibration.attempts == 0 and crash_calibration.verifier_errors == 0
