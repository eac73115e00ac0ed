"""A verifiers taskset Passband did not write (tests/plugins/vf-word-arithmetic), imported by the command and
probed through a real Celery worker: its own @vf.reward methods, in the helper process, pay a scripted oracle
on every task and a null policy on none; /api/v1/verify gives each rollout's completion the rollout's verdict."""

import json
import re

import pytest
from django.core.management import call_command

from accounts.services import api_token_create
from calibration import services
from calibration.models import Calibration, Campaign, Outcome, Rollout
from curation.models import Environment, Task, TaskStatus
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, wait_for

ROLLOUTS = 3
_QUESTION = re.compile(r"\\boxed\{\}\.\n\n(.*?)\n<assistant>", re.DOTALL)


def imported(owner, tmp_path):
    mapping = tmp_path / "mapping.json"
    fields = {
        "prompt": "{prompt}",
        "answer_column": "solution",
        "answer_extractor": "after_hashes",
        "key_column": "key",
    }
    mapping.write_text(json.dumps(fields))
    call_command(
        "import_verifiers",
        "vf-word-arithmetic",
        environment="word-arithmetic",
        create=True,
        owner=owner.username,
        mapping_file=mapping,
        reference_format="\\boxed{{answer}}",
    )
    return Environment.objects.get(name="word-arithmetic")


def oracle(environment):
    """A scripted policy that answers every task right, in the taskset's format."""
    answers = {
        task.current_version.prompt[-1]["content"].split("\n\n", 1)[1]: task.current_version.answer
        for task in Task.objects.filter(environment=environment).select_related("current_version")
    }
    return lambda prompt_text, seed: f"Working it out.\n\\boxed{{{answers[_QUESTION.search(prompt_text).group(1)]}}}"


def probe_through_a_worker(environment, owner, respond, name):
    with OpenAITestServer(respond=respond, record_requests=False) as server:
        model = services.probe_model_add(name=name, backend="openai", base_url=server.base_url, model="fake-model")
        campaign = services.campaign_start(
            environment=environment, probe_model=model, created_by=owner, rollouts=ROLLOUTS, round_size=ROLLOUTS, seed=1
        )
        with running_worker(queues="default,generate,verify", concurrency=1):
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
                timeout=240,
                what="the worker to finish the campaign",
            )
    return model, campaign


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_an_oracle_passes_every_task_and_a_null_policy_none(alice, charlie, client, tmp_path):
    flush_broker()
    environment = imported(alice, tmp_path)
    assert Task.objects.filter(environment=environment).count() == 8

    right, campaign = probe_through_a_worker(environment, alice, oracle(environment), "oracle")
    passed = Rollout.objects.filter(campaign=campaign)
    assert passed.count() == 8 * ROLLOUTS and set(passed.values_list("outcome", flat=True)) == {Outcome.PASS}
    assert set(passed.values_list("detail", flat=True)) == {"reward 1.25 of 1.25 (brief 1×0.25, correct 1×1)"}

    null, campaign = probe_through_a_worker(environment, alice, lambda prompt_text, seed: "I cannot say.", "null")
    failed = Rollout.objects.filter(campaign=campaign)
    assert failed.count() == 8 * ROLLOUTS and set(failed.values_list("outcome", flat=True)) == {Outcome.FAIL}
    assert all("reward 0.25 of 1.25" in detail for detail in failed.values_list("detail", flat=True))
    assert set(Calibration.objects.filter(probe_model=null).values_list("successes", flat=True)) == {0}
    assert set(Calibration.objects.filter(probe_model=right).values_list("successes", flat=True)) == {ROLLOUTS}

    # The trainer's door scores with the same helper: each rollout's completion gets the rollout's verdict.
    Task.objects.filter(environment=environment).update(status=TaskStatus.APPROVED)
    token = api_token_create(user=charlie, name="grader", scopes=["verify"])[1]
    for rollout in [passed.first(), failed.first()]:
        body = client.post(
            "/api/v1/verify",
            {"task": rollout.task_version.task.key, "completion": rollout.text},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        ).json()
        assert (body["outcome"], body["detail"]) == (rollout.outcome, rollout.detail)
