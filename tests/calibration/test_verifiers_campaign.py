"""A verifiers taskset Passband did not write (tests/plugins/vf-word-arithmetic), imported by the command and
probed through a real Celery worker: its own @vf.reward methods, in the helper process, pay a scripted oracle
on every task and a null policy on none; /api/v1/verify gives each rollout's completion the rollout's verdict."""

import json
import re

import pytest
from django.core.management import call_command

from accounts.services import api_token_create
from calibration.models import Calibration, Outcome, Rollout
from curation.models import Environment, Task, TaskStatus
from tests.calibration.scripted import answers_every_task, cannot_say, probe_through_a_worker, probing_worker
from tests.support.workers import flush_broker

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
    return answers_every_task(
        environment,
        question=_QUESTION,
        asked=lambda content: content.split("\n\n", 1)[1],
        reply="Working it out.\n\\boxed{{{answer}}}",
    )


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_an_oracle_passes_every_task_and_a_null_policy_none(alice, charlie, client, tmp_path):
    flush_broker()
    environment = imported(alice, tmp_path)
    assert Task.objects.filter(environment=environment).count() == 8

    with probing_worker():
        right, campaign = probe_through_a_worker(environment, alice, oracle(environment), "oracle", rollouts=ROLLOUTS)
        null, null_campaign = probe_through_a_worker(environment, alice, cannot_say, "null", rollouts=ROLLOUTS)
    passed = Rollout.objects.filter(campaign=campaign)
    assert passed.count() == 8 * ROLLOUTS and set(passed.values_list("outcome", flat=True)) == {Outcome.PASS}
    assert set(passed.values_list("detail", flat=True)) == {"reward 1.25 of 1.25 (brief 1×0.25, correct 1×1)"}

    failed = Rollout.objects.filter(campaign=null_campaign)
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
