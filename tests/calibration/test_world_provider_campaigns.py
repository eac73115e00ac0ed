"""An installed world provider probed through real Celery workers with no change to Passband: `lights` from
tests/plugins/passband-example-world (installed by `make install`, found through its entry point in
`passband.environments`). It claims its tasks ahead of nothing built in, its worlds run the episodes, and the
world's own reward is the verdict: an oracle that switches every lamp on passes every task, a null policy that
only says it did fails every one."""

import json

import pytest

from calibration import services
from calibration.models import Calibration, Outcome, Rollout
from curation.services import environment_create
from engine.worlds.registry import provider_registry
from tests.calibration.scripted import probe_through_a_worker, probing_worker
from tests.factories import import_tasks
from tests.support.workers import flush_broker

pytestmark = pytest.mark.workers

ROLLOUTS = 2
MAX_NEW_TOKENS = 1000


def lights_tasks():
    from passband_lights import task  # the installed out-of-tree package

    return [task(f"lights-{seed}", seed=seed) for seed in (1, 2, 4)]


def oracle(tasks):
    """Switches on exactly the lamps that are off on the first turn, then says it is done."""
    solutions = {task["key"]: json.loads(task["answer"]) for task in tasks}

    def respond(prompt_text, seed):
        if prompt_text.count("<assistant>") > 1:
            return "Done."
        key = next(key for key in solutions if f"[{key}]" in prompt_text)
        return "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in solutions[key])

    return respond


def null_policy(prompt_text, seed):
    return "Every lamp is on now."


@pytest.mark.django_db(transaction=True)
def test_an_installed_world_provider_runs_a_probe_through_real_workers(alice):
    entry = provider_registry().entry("lights")
    assert entry is not None, f"run make install (refused: {provider_registry().refused()})"
    assert entry.distribution == "passband-example-world"
    tasks = lights_tasks()
    environment = environment_create(name="lights-tasks", domain="workflow")
    report = import_tasks(environment, alice, *tasks, run_audits=True)
    assert report.ok, report.summary()
    assert all(services.is_tool_task(task.current_version) for task in environment.tasks.all())

    flush_broker()
    with probing_worker():
        probes = {
            policy: probe_through_a_worker(
                environment,
                alice,
                respond,
                policy,
                rollouts=ROLLOUTS,
                seed=5,
                tool_parser=True,
                max_new_tokens=MAX_NEW_TOKENS,
            )
            for policy, respond in (("oracle", oracle(tasks)), ("null", null_policy))
        }
    probe_models = {policy: model for policy, (model, _) in probes.items()}
    campaigns = {policy: campaign for policy, (_, campaign) in probes.items()}

    for policy, campaign in campaigns.items():
        rollouts = list(Rollout.objects.filter(campaign=campaign).select_related("task_version__task"))
        assert len(rollouts) == ROLLOUTS * len(tasks)
        wanted = Outcome.PASS if policy == "oracle" else Outcome.FAIL
        assert [(r.task_version.task.key, r.outcome, r.detail) for r in rollouts if r.outcome != wanted] == [], policy
        for rollout in rollouts:
            episode = rollout.episode
            assert episode["environment"] == "lights" and episode["final_state"]["lamps"]
            calls = len(json.loads(rollout.task_version.answer)) if policy == "oracle" else 0
            assert episode["counts"]["tool_calls"] == episode["counts"]["ok"] == calls
        expected = ROLLOUTS if policy == "oracle" else 0
        calibrations = Calibration.objects.filter(probe_model=probe_models[policy])
        assert {(c.attempts, c.successes) for c in calibrations} == {(ROLLOUTS, expected)}
