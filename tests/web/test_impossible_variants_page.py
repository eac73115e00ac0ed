"""The impossible-variant button (who may start a probe, by the policy table) and the false-pass rate with its
bound on the environment page and the API. Probes through a worker: tests/calibration/test_impossible_variants.py."""

import pytest

from accounts.services import api_token_create
from calibration import services
from calibration.models import ImpossibleVariant, VariantProbe, VariantRollout
from curation.models import Task
from curation.services import environment_create
from engine.verifiers import impossible
from tests.factories import import_tasks


@pytest.fixture
def sums(alice, db):
    environment = environment_create(name="sums", domain="math")
    import_tasks(
        environment,
        alice,
        *[{"key": f"sum-{n}", "prompt": f"What is {n} + 1?", "answer": str(n + 1), "verifier": {"kind": "numeric"}}
          for n in range(3)],
    )  # fmt: skip
    return environment


@pytest.fixture
def model(db):
    return services.probe_model_add(name="scripted", backend="openai", base_url="http://127.0.0.1:9/v1", model="m")


def start(client, user, environment, **fields):
    client.force_login(user)
    return client.post(f"/environments/{environment.name}/impossible-variants/", {"model": "scripted", **fields})


@pytest.mark.django_db
def test_staff_probe_an_environment_and_an_owner_only_their_own_task(client, sums, model, alice, bob, charlie, staff):
    assert start(client, staff, sums, sample="2").status_code == 302
    probe = VariantProbe.objects.get()
    assert len(probe.task_version_ids) == 2 and probe.created_by == staff and probe.rollouts == 8

    assert start(client, alice, sums, task="sum-1").status_code == 302
    assert VariantProbe.objects.latest("id").task_version_ids == [Task.objects.get(key="sum-1").current_version_id]
    assert start(client, alice, sums).status_code == 403  # the whole environment is staff's
    assert start(client, bob, sums).status_code == 403
    assert start(client, bob, sums, task="sum-1").status_code == 403  # a reviewer, not its author
    assert start(client, charlie, sums, task="sum-1").status_code == 403  # trainers use the API
    assert VariantProbe.objects.count() == 2


def recorded(environment, model, *, passes: int, fails: int) -> None:
    """A finished probe of one variant with these graded attempts (what a worker stores)."""
    version = Task.objects.get(key="sum-0").current_version
    probe = VariantProbe.objects.create(
        environment=environment, probe_model=model, seed=1, rollouts=passes + fails, status="done"
    )
    variant = ImpossibleVariant.objects.create(
        probe=probe, task_version=version, status="ready", kind="shifted_answer", change="reference '1' -> '2'"
    )
    VariantRollout.objects.bulk_create(
        VariantRollout(variant=variant, sample_index=index, seed=index, outcome="pass" if index < passes else "fail")
        for index in range(passes + fails)
    )


@pytest.mark.django_db
def test_the_page_and_the_api_give_the_bound_when_nothing_passed(client, sums, model, staff, bob, alice):
    client.force_login(alice)
    page = client.get("/environments/sums/").content.decode()
    assert "No impossible variant probed yet." in page
    assert 'name="sample"' not in page and '<input type="text" name="task" required>' in page  # her own tasks only
    client.force_login(bob)
    assert 'id="impossible-variants-form"' not in client.get("/environments/sums/").content.decode()

    recorded(sums, model, passes=0, fails=20)
    bound = impossible.false_pass_bound(passes=0, trials=20)
    client.force_login(staff)
    page = client.get("/environments/sums/").content.decode()
    assert 'id="false-pass-scripted"' in page and f"≤ {bound:.3f}" in page and "0.000 (0 of 20)" in page
    assert "Probe impossible variants" in page

    token = api_token_create(user=bob, name="reader", scopes=["read"])[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    rows = client.get("/api/v1/environments/sums/impossible-variants", **auth).json()
    assert [(row["trials"], row["false_passes"], row["false_pass_rate"]) for row in rows] == [(20, 0, 0.0)]
    assert rows[0]["upper_bound"] == pytest.approx(bound) and rows[0]["level"] == 0.95
    assert client.get("/api/v1/environments/nowhere/impossible-variants", **auth).status_code == 404
