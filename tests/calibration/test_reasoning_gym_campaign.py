"""reasoning-gym generators through Passband: imported by the command, probed by a real worker, scored by
the generator's own score_answer, and the sweep's pass rate per level on the dashboard."""

import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from calibration.models import Calibration, Outcome, Rollout
from curation.models import Environment, Task
from tests.calibration.scripted import answers_every_task, cannot_say, probe_through_a_worker, probing_worker
from tests.support.workers import flush_broker

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
    return answers_every_task(environment, question=_QUESTION, reply="Thinking.\n<answer>{answer}</answer>")


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_an_oracle_passes_every_generated_task_and_a_null_policy_none(alice, client):
    flush_broker()
    environment = sweep(owner=alice.username)
    tasks = Task.objects.filter(environment=environment)
    assert tasks.count() == 8  # four levels of num_digits, two tasks each

    with probing_worker():
        right, campaign = probe_through_a_worker(environment, alice, oracle(environment), "oracle", rollouts=3)
        null, null_campaign = probe_through_a_worker(environment, alice, cannot_say, "null", rollouts=3)
    rollouts = Rollout.objects.filter(campaign=campaign)
    assert rollouts.count() == 24 and set(rollouts.values_list("outcome", flat=True)) == {Outcome.PASS}
    assert all("scored 1 by basic_arithmetic" in detail for detail in rollouts.values_list("detail", flat=True))

    rollouts = Rollout.objects.filter(campaign=null_campaign)
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
