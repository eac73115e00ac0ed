"""Environments are created and edited in the app, with the threshold defaults filled in."""

import pytest
from django.urls import reverse

from calibration.models import Band, Calibration, ProbeModel
from curation.models import Environment
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


def test_the_create_form_starts_from_the_default_thresholds_and_creates(client, bob, settings):
    client.force_login(bob)
    page = client.get(reverse("environment_create")).content.decode()
    assert f'value="{settings.PASSBAND_FLOOR}"' in page and f'value="{settings.PASSBAND_RETIRE}"' in page
    response = client.post(
        reverse("environment_create"),
        {
            "name": "gsm8k",
            "domain": "math",
            "default_verifier": '{"kind": "math"}',
            "floor": settings.PASSBAND_FLOOR,
            "retire_at": settings.PASSBAND_RETIRE,
            "max_new_tokens": "384",
        },
    )
    assert response.status_code == 302
    environment = Environment.objects.get(name="gsm8k")
    assert (environment.default_verifier, environment.max_new_tokens, environment.title) == (
        {"kind": "math"},
        384,
        "gsm8k",
    )


def test_the_create_form_names_what_is_wrong(client, bob):
    client.force_login(bob)
    page = client.post(
        reverse("environment_create"),
        {
            "name": "x",
            "domain": "math",
            "default_verifier": "{kind: math}",
            "floor": "0.5",
            "retire_at": "0.4",
        },
    ).content.decode()
    assert "Not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)." in page
    assert "retire_at: thresholds need 0 &lt; floor &lt; retire_at &lt; 1" in page
    assert not Environment.objects.filter(name="x").exists()


def test_editing_thresholds_rebands_from_stored_rollouts(client, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("t"))
    model = ProbeModel.objects.create(name="m", backend="openai", base_url="http://127.0.0.1:9/v1")
    version = arithmetic.tasks.get().current_version
    Calibration.objects.create(
        task_version=version, probe_model=model, attempts=10, successes=5, pass_rate=0.5, band=Band.IN_BAND
    )
    client.force_login(bob)
    form = client.get(reverse("environment_edit", args=["arithmetic"])).content.decode()
    assert 'name="name"' in form and "disabled" in form
    response = client.post(
        reverse("environment_edit", args=["arithmetic"]),
        {
            "name": "ignored",
            "title": "Arithmetic",
            "domain": "math",
            "default_verifier": '{"kind": "math"}',
            "floor": "0.02",
            "retire_at": "0.4",
            "max_new_tokens": "",
        },
        follow=True,
    )
    assert "1 calibrations re-banded" in response.content.decode()
    arithmetic.refresh_from_db()
    assert (arithmetic.name, arithmetic.title, arithmetic.retire_at, arithmetic.max_new_tokens) == (
        "arithmetic",
        "Arithmetic",
        0.4,
        None,
    )


def test_only_reviewers_and_staff_manage_environments(client, alice, charlie):
    for user in (alice, charlie):
        client.force_login(user)
        assert client.get(reverse("environment_create")).status_code == 403
        assert client.post(reverse("environment_edit", args=["arithmetic"]), {}).status_code in (403, 404)


def test_the_admin_form_has_the_threshold_defaults(admin_client, settings):
    page = admin_client.get("/admin/curation/environment/add/").content.decode()
    assert f'value="{settings.PASSBAND_FLOOR}"' in page and f'value="{settings.PASSBAND_RETIRE}"' in page


def test_fixtures_are_checked_saved_and_rerun_over_the_environment(client, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("sum", "What is 2 + 3?", "5"), run_audits=True)
    client.force_login(bob)
    url = reverse("environment_edit", args=["arithmetic"])
    fields = {"domain": "math", "floor": arithmetic.floor, "retire_at": arithmetic.retire_at}
    refused = client.post(url, {**fields, "verifier_fixtures": '[{"kind": "always", "completion": "x"}]'})
    assert refused.status_code == 200 and "fixtures[0].kind" in refused.content.decode()
    fixtures = '[{"kind": "full_reward", "completion": "It is 6."}]'  # wrong on purpose: the task fails it
    saved = client.post(url, {**fields, "verifier_fixtures": fixtures}, follow=True).content.decode()
    assert "fixtures saved and 1 task(s) re-checked, 1 gameable" in saved
    version = arithmetic.tasks.get().current_version
    version.refresh_from_db()
    assert version.gameable is True and version.gameability_findings[0]["label"] == "fixture 1 (full_reward)"
