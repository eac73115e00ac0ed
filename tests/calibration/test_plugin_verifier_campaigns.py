"""An installed verifier kind probed through real Celery workers with no change to Passband: `word_count` from
tests/plugins/passband-example-verifier (installed by `make install`, found through its entry point). An
oracle that answers in the asked number of words passes every task and a rambling policy fails every one;
the kind declares itself batchable, so its rounds are batched like Passband's own fast kinds."""

import pytest

from calibration import services
from calibration.models import Calibration, Campaign, Outcome, ProbeModel, Rollout
from curation.services import environment_create
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = pytest.mark.workers

ROLLOUTS = 3
TASKS = [
    {
        "key": f"describe-{subject}",
        "prompt": f"Describe {subject} in two to four words, starting with its name.",
        "answer": f"{subject.capitalize()} shines",
        "verifier": {"kind": "word_count", "min": 2, "max": 4, "same_first_word": True},
    }
    for subject in ("sun", "moon", "rain")
]


def oracle(prompt_text, seed):
    subject = next(task["answer"].split()[0] for task in TASKS if task["prompt"] in prompt_text)
    return f"{subject} is bright"


def rambler(prompt_text, seed):
    return "Well, there is a great deal that one could say about that, and I will say all of it."


@pytest.mark.django_db(transaction=True)
def test_an_installed_kind_scores_a_probe_through_real_workers(alice):
    environment = environment_create(name="word-counts", domain="math")
    report = import_tasks(environment, alice, *TASKS, run_audits=True)
    assert report.ok and not report.audit_failures, report.summary()

    flush_broker()
    with OpenAITestServer(respond=oracle) as oracle_server, OpenAITestServer(respond=rambler) as rambler_server:
        probe_models = {
            policy: services.probe_model_add(name=policy, backend="openai", base_url=server.base_url, model=policy)
            for policy, server in (("oracle", oracle_server), ("rambler", rambler_server))
        }
        # Read from the installed kind's own trait: its tasks share a job like Passband's fast kinds.
        model = ProbeModel.objects.get(name="oracle")
        assert services.tasks_per_job(model, verifier=TASKS[0]["verifier"], tools=None) > 1
        campaigns = {
            policy: services.campaign_start(
                environment=environment,
                probe_model=probe_model,
                created_by=alice,
                rollouts=ROLLOUTS,
                round_size=ROLLOUTS,
                seed=3,
            )
            for policy, probe_model in probe_models.items()
        }
        with running_worker(queues="default,generate,verify", concurrency=1):
            wait_for(
                lambda: all(
                    Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE
                    for campaign in campaigns.values()
                ),
                timeout=300,
                what="the worker to finish both campaigns",
            )

    for policy, campaign in campaigns.items():
        rollouts = list(Rollout.objects.filter(campaign=campaign))
        assert len(rollouts) == ROLLOUTS * len(TASKS)
        wanted = Outcome.PASS if policy == "oracle" else Outcome.FAIL
        assert [(r.outcome, r.detail) for r in rollouts if r.outcome != wanted] == [], policy
        # The kind's own words, from its helper process: the oracle's three words, the rambler's wrong start.
        said = "3 words" if policy == "oracle" else "starts with 'Well,'"
        assert all(rollout.detail.startswith(said) for rollout in rollouts), {r.detail for r in rollouts}
        expected = ROLLOUTS if policy == "oracle" else 0
        calibrations = Calibration.objects.filter(probe_model=probe_models[policy])
        assert {(c.attempts, c.successes) for c in calibrations} == {(ROLLOUTS, expected)}
