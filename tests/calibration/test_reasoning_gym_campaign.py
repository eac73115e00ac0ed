"""reasoning-gym generators through Passband: imported by the command, probed by a real worker, scored by
the generator's own score_answer, and the sweep's pass rate per level on the dashboard."""

import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from calibration import services
from calibration.models import Calibration, Campaign, Outcome, Rollout
from curation.models import Environment, Task
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, wait_for

GENERATOR = "basic_arithmetic"
_QUESTION = re.compile(r"<user>(.*?)\n<assistant>", re.DOTALL)


def sweep(environment="rg", **options):
    call_command(
        "import_reasoning_gym",
        GENERATOR,
        environment=environment,
        create=True,
        curriculum=True,
        attribute=["num_digits"],
        size=2,
        owner=options.pop("owner"),
        **options,
    )
    return Environment.objects.get(name=environment)


def oracle(environment):
    """A scripted policy that answers every task right, in reasoning-gym's answer format."""
    answers = {
        task.current_version.prompt[-1]["content"]: task.current_version.answer
        for task in Task.objects.filter(environment=environment).select_related("current_version")
    }
    return lambda prompt_text, seed: f"Thinking.\n<answer>{answers[_QUESTION.search(prompt_text).group(1)]}</answer>"


def probe_through_a_worker(environment, owner, respond, name):
    with OpenAITestServer(respond=respond, record_requests=False) as server:
        model = services.probe_model_add(name=name, backend="openai", base_url=server.base_url, model="fake-model")
        campaign = services.campaign_start(
            environment=environment, probe_model=model, created_by=owner, rollouts=3, round_size=3, seed=1
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
def test_an_oracle_passes_every_generated_task_and_a_null_policy_none(alice, client):
    flush_broker()
    environment = sweep(owner=alice.username)
    tasks = Task.objects.filter(environment=environment)
    assert tasks.count() == 8  # four levels of num_digits, two tasks each

    right, campaign = probe_through_a_worker(environment, alice, oracle(environment), "oracle")
    rollouts = Rollout.objects.filter(campaign=campaign)
    assert rollouts.count() == 24 and set(rollouts.values_list("outcome", flat=True)) == {Outcome.PASS}
    assert all("scored 1 by basic_arithmetic" in detail for detail in rollouts.values_list("detail", flat=True))

    null, campaign = probe_through_a_worker(environment, alice, lambda prompt_text, seed: "I cannot say.", "null")
    rollouts = Rollout.objects.filter(campaign=campaign)
    assert rollouts.count() == 24 and set(rollouts.values_list("outcome", flat=True)) == {Outcome.FAIL}
    assert set(Calibration.objects.filter(probe_model=null).values_list("successes", flat=True)) == {0}

    client.force_login(alice)
    page = client.get(reverse("dashboard"), {"environment": environment.name, "model": right.name}).content.decode()
    table = page[page.index('id="curriculum-sweep"') :]
    for digits in (1, 2, 3, 4):
        assert re.search(
            rf"<td>num_digits</td><td>{digits - 1}</td><td>{digits}</td>\s*<td>2</td><td>2</td>\s*<td>1\.000 \(6/6\)",
            table,
        )
    page = client.get(reverse("dashboard"), {"environment": environment.name, "model": null.name}).content.decode()
    assert "0.000 (0/6)" in page[page.index('id="curriculum-sweep"') :]
