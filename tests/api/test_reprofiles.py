"""POST and GET /api/v1/reprofiles: re-profile an environment for a new checkpoint, and read its state.

alice authors (may start one), bob reviews (holds the curate scope, but may not probe: 403),
charlie trains (his tokens cannot hold curate: 403)."""

from unittest import mock

import pytest

from accounts.services import api_token_create
from calibration import services
from calibration.models import Campaign, Reprofile
from tests.factories import checkpoint_run, pinned_release, sample_finished

pytestmark = pytest.mark.django_db


@pytest.fixture
def checkpoints(arithmetic, alice):
    return checkpoint_run(arithmetic, alice)


@pytest.fixture(autouse=True)
def no_broker():
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        yield


def bearer(user, *scopes):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=user, name='t', scopes=list(scopes))[1]}"}


def start(client, headers, **body):
    return client.post(
        "/api/v1/reprofiles",
        {"environment": "arithmetic", "probe_model": "ckpt-2", "sample": 4, "seed": 1, **body},
        content_type="application/json",
        **headers,
    )


def test_only_who_may_probe_the_environment_starts_a_reprofile(client, alice, bob, charlie, checkpoints):
    assert start(client, {}).status_code == 401
    refused = start(client, bearer(bob, "read", "curate"))
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    assert start(client, bearer(charlie, "read", "export")).status_code == 403  # no curate scope
    assert start(client, bearer(alice, "read")).status_code == 403
    assert not Reprofile.objects.exists() and not Campaign.objects.exists()
    assert start(client, bearer(alice, "curate"), environment="nowhere").status_code == 404
    missing = start(client, bearer(alice, "curate"), probe_model="nope")
    assert missing.status_code == 400 and missing.json()["fields"] == {"probe_model": ["No probe model named 'nope'."]}


def test_a_start_samples_and_a_second_start_returns_the_same_reprofile(client, alice, bob, checkpoints):
    headers = bearer(alice, "curate")
    response = start(client, headers)
    assert response.status_code == 201
    body = response.json()
    campaign = Campaign.objects.get()
    assert response["Location"] == f"/api/v1/reprofiles/{body['id']}"
    assert (body["stage"], body["tasks"], body["probed"], body["predicted"], body["finished"]) == (
        "sample",
        12,
        4,
        0,
        False,
    )
    assert body["sample_campaign"]["id"] == campaign.pk and body["sample_campaign"]["status"] == "running"
    assert body["reprofile_campaign"] is None and body["probe_model"] == "ckpt-2" and body["run"] == "run-c"

    again = start(client, headers, sample=8)
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    assert Campaign.objects.count() == 1 and Reprofile.objects.count() == 1

    # The sample done, the second step runs (a worker takes it); reading shows the counts and both campaigns.
    sample_finished(campaign, checkpoints[1])
    services.campaign_finish_if_done(campaign_id=campaign.pk)
    services.checkpoint_reprofile_continue(reprofile_id=body["id"])
    state = client.get(f"/api/v1/reprofiles/{body['id']}", **bearer(bob, "curate")).json()
    assert state["stage"] == "reprofile" and state["predicted"] + state["probed"] + 4 == 12
    assert state["sample_campaign"]["status"] == "done" and state["ability"] is not None
    if state["probed"]:
        assert state["reprofile_campaign"]["status"] == "running" and not state["finished"]
        assert start(client, headers).json()["id"] == body["id"]  # still in progress: the same one
    assert Reprofile.objects.count() == 1

    listed = client.get("/api/v1/reprofiles", {"environment": "arithmetic", "probe_model": "ckpt-2"}, **headers)
    assert [row["id"] for row in listed.json()["results"]] == [body["id"]]
    assert client.get("/api/v1/reprofiles", {"probe_model": "ckpt-1"}, **headers).json()["results"] == []


def test_a_reprofile_whose_sample_was_cancelled_samples_again(client, alice, checkpoints):
    headers = bearer(alice, "curate")
    first = start(client, headers).json()
    services.campaign_set_status(campaign=Campaign.objects.get(), status=Campaign.Status.CANCELLED)
    again = start(client, headers)
    assert again.status_code == 201 and again.json()["id"] == first["id"]
    assert again.json()["sample_campaign"]["id"] != first["sample_campaign"]["id"]
    assert again.json()["sample_campaign"]["status"] == "running" and Reprofile.objects.count() == 1


def test_a_model_that_cannot_be_reprofiled_is_a_400_naming_why(client, alice, checkpoints):
    response = start(client, bearer(alice, "curate"), probe_model="ckpt-1")
    assert response.status_code == 400 and "is the first checkpoint of run run-c" in response.json()["detail"]
    assert not Reprofile.objects.exists()


def test_the_reprofile_calls_are_in_the_schema(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert {"get", "post"} <= set(schema["paths"]["/api/v1/reprofiles"])
    assert "get" in schema["paths"]["/api/v1/reprofiles/{reprofile_id}"]
    assert "ReprofileRequest" in schema["components"]["schemas"]
    assert "stage" in schema["components"]["schemas"]["Reprofile"]["properties"]


def test_a_release_picks_the_tasks_to_reprofile(client, alice, bob, arithmetic, checkpoints):
    first, _ = checkpoints
    pinned = list(arithmetic.tasks.order_by("key")[:6])
    release = pinned_release(alice, first, [task.current_version for task in pinned], environment=arithmetic)
    response = start(client, bearer(alice, "curate"), release=release.pk)
    assert response.status_code == 201, response.json()
    reprofile = Reprofile.objects.get(pk=response.json()["id"])
    assert response.json()["tasks"] == 6 and response.json()["release"] == release.pk == reprofile.release_id
    assert sorted(reprofile.task_version_ids) == sorted(task.current_version_id for task in pinned)
    sampled = set(reprofile.sample_campaign.items.values_list("task_version_id", flat=True))
    assert sampled <= set(reprofile.task_version_ids) and len(sampled) == 4
    # A release that pins nothing of the environment, and one that does not exist.
    empty = pinned_release(alice, first, [], environment=arithmetic)
    refused = start(client, bearer(alice, "curate"), release=empty.pk, probe_model="ckpt-1")
    assert refused.status_code == 400 and "pins no task of arithmetic" in refused.json()["fields"]["release"][0]
    assert start(client, bearer(alice, "curate"), release=10**9).status_code == 404
    # A release alice may not see (a reviewer's) is a 404 too, as if it did not exist.
    hidden = pinned_release(bob, first, [task.current_version for task in pinned], environment=arithmetic)
    assert start(client, bearer(alice, "curate"), release=hidden.pk, probe_model="ckpt-1").status_code == 404
