"""Plug-in environments probed through real Celery workers: for each installed plug-in, Passband's own
back office and the out-of-tree inventory package, a scripted oracle policy passes every task and a
null policy fails every task. The model is the test server over HTTP, scripted to call the tools."""

import json

import pytest

from calibration import services
from calibration.models import Calibration, Campaign, Outcome, Rollout
from curation.services import environment_create
from engine.episodes.backoffice_tasks import backoffice_tasks
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = pytest.mark.workers

# One attempt per task and policy: the claim is per task (39 tasks, each an episode of sandboxed tool calls).
ROLLOUTS = 1
# The test server's tokens are bytes: the oracle's longest turn (six calls) is about 830 of them.
MAX_NEW_TOKENS = 1500


def plugin_tasks():
    from passband_inventory.tasks import inventory_tasks  # the installed out-of-tree package

    return {"backoffice": list(backoffice_tasks()), "inventory": inventory_tasks()}


def oracle(tasks):
    """A model that knows every task's solution: on the first turn it makes the reference calls, then it answers."""
    solutions = {task["prompt"][-1]["content"]: json.loads(task["answer"]) for task in tasks}

    def respond(prompt_text, seed):
        if prompt_text.count("<assistant>") > 1:
            return "Done."
        request = max((text for text in solutions if text in prompt_text), key=len)
        return "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in solutions[request])

    return respond


def null_policy(prompt_text, seed):
    return "I have done what you asked."


@pytest.mark.django_db(transaction=True)
def test_oracle_passes_and_null_fails_every_task_of_every_plugin(alice):
    tasks = plugin_tasks()
    environments = {}
    for name, objects in tasks.items():
        environments[name] = environment_create(name=f"{name}-tasks", domain="workflow")
        report = import_tasks(environments[name], alice, *objects, run_audits=True)
        assert report.ok and not report.audit_failures, report.summary()
    all_tasks = [task for objects in tasks.values() for task in objects]

    flush_broker()
    with (
        OpenAITestServer(respond=oracle(all_tasks), tool_parser=True) as oracle_server,
        OpenAITestServer(respond=null_policy, tool_parser=True) as null_server,
    ):
        probe_models = {
            policy: services.probe_model_add(
                name=policy, backend="openai", base_url=server.base_url, model=policy, max_new_tokens=MAX_NEW_TOKENS
            )
            for policy, server in (("oracle", oracle_server), ("null", null_server))
        }
        campaigns = {
            (policy, name): services.campaign_start(
                environment=environment,
                probe_model=probe_model,
                created_by=alice,
                rollouts=ROLLOUTS,
                round_size=ROLLOUTS,
                seed=5,
            )
            for policy, probe_model in probe_models.items()
            for name, environment in environments.items()
        }
        with running_worker(queues="default,generate,verify", concurrency=1):
            wait_for(
                lambda: all(
                    Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE
                    for campaign in campaigns.values()
                ),
                timeout=600,
                what="the worker to finish the four campaigns",
            )

    for (policy, name), campaign in campaigns.items():
        rollouts = list(Rollout.objects.filter(campaign=campaign).select_related("task_version__task"))
        assert len(rollouts) == ROLLOUTS * len(tasks[name])
        wanted = Outcome.PASS if policy == "oracle" else Outcome.FAIL
        wrong = [
            (rollout.task_version.task.key, rollout.outcome, rollout.detail)
            for rollout in rollouts
            if rollout.outcome != wanted
        ]
        assert wrong == [], (policy, name)
        for rollout in rollouts:
            episode = rollout.episode
            assert episode["environment"] == name and episode["stop_reason"] == "answered"
            calls = len(json.loads(rollout.task_version.answer)) if policy == "oracle" else 0
            # Every reference call ran (in the sandbox) and was accepted by the plug-in's tools.
            assert episode["counts"]["tool_calls"] == episode["counts"]["ok"] == calls
        calibrations = Calibration.objects.filter(
            probe_model=probe_models[policy], task_version__task__environment=environments[name]
        )
        assert calibrations.count() == len(tasks[name])
        expected = ROLLOUTS if policy == "oracle" else 0
        assert {(c.attempts, c.successes) for c in calibrations} == {(ROLLOUTS, expected)}
    # Every episode reached its world and none was failed by it; each world was reset (in the sandbox) before
    # its model acted, and those resets were timed; every tool call the episodes made is counted.
    from calibration.selectors import environment_health

    for name, environment in environments.items():
        (health,) = environment_health(environment=environment)
        episodes = Rollout.objects.filter(task_version__task__environment=environment)
        assert health["world"] == name
        assert (health["episodes"], health["failures"], health["tool_errors"]) == (episodes.count(), 0, 0)
        assert health["tool_calls"] == sum(r.episode["counts"]["tool_calls"] for r in episodes)
        assert health["reset_ms_mean"] > 0 and health["reset_ms_max"] >= health["reset_ms_mean"]
        assert all(r.episode["reset_ms"] > 0 for r in episodes)
