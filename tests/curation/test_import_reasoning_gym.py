"""manage.py import_reasoning_gym: generated tasks through the task import, all or nothing."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from calibration.models import Band, Calibration, ProbeModel
from curation.models import Environment, Task

pytestmark = pytest.mark.django_db


def run(*args, **options):
    out = io.StringIO()
    call_command("import_reasoning_gym", *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def test_tasks_of_one_config_import_once(alice):
    said = run("basic_arithmetic", environment="rg", create=True, owner="alice", config='{"max_terms": 3}', size=5)
    assert "5 new task(s)" in said
    environment = Environment.objects.get(name="rg")
    version = Task.objects.filter(environment=environment).first().current_version
    assert version.verifier["kind"] == "reasoning_gym" and version.prompt[-1]["role"] == "user"
    assert version.metadata["reasoning_gym"]["config"]["max_terms"] == 3 and version.audit_passed
    again = run("basic_arithmetic", environment="rg", owner="alice", config='{"max_terms": 3}', size=5)
    assert "0 new task(s)" in again and "5 duplicate(s)" in again


def test_a_gameable_generator_is_flagged_at_import(alice):
    said = run("game_of_life_halting", environment="rg", create=True, owner="alice", size=2)
    assert said.count("gameable:") == 2 and "paid no answer at all, in answer tags" in said
    assert set(Task.objects.values_list("current_version__gameable", flat=True)) == {True}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"config": "{not json"}, "--config: not JSON"),
        ({"config": "[1]"}, "--config: must be a JSON object"),
        ({"config": '{"min_terms": 5, "max_terms": 2}'}, "refused config"),
        ({"curriculum": True, "config": '{"max_terms": 3}'}, "--config and --curriculum"),
        ({"curriculum": True, "attribute": ["colour"]}, "no attribute 'colour'"),
    ],
)
def test_bad_options_say_what_is_wrong_and_write_nothing(alice, options, message):
    with pytest.raises(CommandError, match=message):
        run("basic_arithmetic", environment="rg", create=True, owner="alice", **options)
    assert not Task.objects.exists()


def test_an_unknown_generator_is_refused(alice):
    with pytest.raises(CommandError, match="unknown reasoning-gym generator 'nope'"):
        run("nope", environment="rg", create=True, owner="alice")


def test_the_dashboard_shows_pass_rate_per_curriculum_level(alice, client):
    run(
        "basic_arithmetic",
        environment="rg",
        create=True,
        owner="alice",
        curriculum=True,
        attribute=["num_terms"],
        size=2,
    )
    environment = Environment.objects.get(name="rg")
    model = ProbeModel.objects.create(name="probe", backend="openai")
    for task in Task.objects.filter(environment=environment).select_related("current_version"):
        terms = task.current_version.metadata["reasoning_gym"]["config"]["max_terms"]
        successes = 8 if terms == 2 else (2 if terms == 3 else 0)  # easy, in band, too hard
        Calibration.objects.create(
            task_version=task.current_version, probe_model=model, attempts=8, successes=successes, band=Band.IN_BAND
        )
    client.force_login(alice)
    page = client.get(reverse("dashboard"), {"environment": "rg", "model": "probe"}).content.decode()
    table = page[page.index('id="curriculum-sweep"') :]
    assert "1.000 (16/16)" in table and "0.250 (4/16) · in band" in table and "0.000 (0/16)" in table
    assert table.count('class="in-band"') == 1
    # An environment without sweeps shows no such table.
    Environment.objects.create(name="plain", domain="math")
    assert 'id="curriculum-sweep"' not in client.get(reverse("dashboard"), {"environment": "plain"}).content.decode()
