"""Probe a sample or the task list's filter, with an estimate first and a question before a duplicate."""

from unittest import mock

import pytest
from django.urls import reverse

from calibration import selectors, services
from calibration.models import Campaign, ProbeModel
from curation.models import Task, TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(db):
    return ProbeModel.objects.create(
        name="probe",
        backend="openai",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        max_new_tokens=100,
        usd_per_million_output_tokens=10,
    )


@pytest.fixture
def tasks(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        *[math_task(f"t-{i:02d}", question=f"What is {i} + 3?", answer=str(i + 3)) for i in range(30)],
    )
    Task.objects.filter(key__in=["t-00", "t-01", "t-02"]).update(status=TaskStatus.SUBMITTED)
    Task.objects.filter(key="t-03").update(status=TaskStatus.REJECTED)


def post(client, user, **data):
    client.force_login(user)
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        return client.post(reverse("environment_probe", args=["arithmetic"]), {"model": "probe", **data})


def test_a_sample_is_drawn_by_its_seed_and_never_takes_rejected_tasks(arithmetic, tasks, model):
    first = selectors.probe_task_versions(environment=arithmetic, scope="sample", sample_size=10, sample_seed=7)
    again = selectors.probe_task_versions(environment=arithmetic, scope="sample", sample_size=10, sample_seed=7)
    everything = selectors.probe_task_versions(environment=arithmetic)
    assert first == again and len(first) == 10 and set(first) < set(everything) and len(everything) == 29


def test_the_estimate_comes_first_then_the_confirmed_sample_starts(client, alice, arithmetic, tasks, model):
    response = post(client, alice, scope="sample", sample_size="5", sample_seed="11", rollouts="4", max_new_tokens="50")
    page = response.content.decode()
    assert response.status_code == 200 and not Campaign.objects.exists()
    # No rollouts of this model yet: token prices, each rollout spending its whole budget, and the
    # time at the assumed 50 tokens per second (20 rollouts of 50 tokens: 20 s).
    assert "5 tasks" in page and "= 20 rollouts of at most 50 new tokens" in page
    assert 'id="estimate-cost">$0.0100<' in page and 'id="estimate-time">20 s<' in page
    assert "assumed 50 tokens per second" in page
    response = post(
        client, alice, scope="sample", sample_size="5", sample_seed="11", rollouts="4", max_new_tokens="50", confirm="1"
    )
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and campaign.max_new_tokens == 50 and campaign.max_rollouts == 4
    expected = selectors.probe_task_versions(environment=arithmetic, scope="sample", sample_size=5, sample_seed=11)
    assert sorted(campaign.items.values_list("task_version_id", flat=True)) == expected


def test_probe_the_task_lists_filter(client, alice, arithmetic, tasks, model):
    post(client, alice, scope="filter", status="submitted", confirm="1")
    campaign = Campaign.objects.get()
    assert sorted(campaign.items.values_list("task_version__task__key", flat=True)) == ["t-00", "t-01", "t-02"]


def test_a_second_probe_of_the_same_environment_and_model_asks_first(client, alice, arithmetic, tasks, model):
    running = services.campaign_start(environment=arithmetic, probe_model=model, created_by=alice, enqueue=False)
    page = post(client, alice, scope="all").content.decode()
    assert (
        'id="probe-duplicate"' in page and f"campaign #{running.pk}" in page and "Start another campaign anyway" in page
    )
    assert Campaign.objects.count() == 1
    services.campaign_set_status(campaign=running, status=Campaign.Status.CANCELLED)
    assert 'id="probe-duplicate"' not in post(client, alice, scope="all").content.decode()


def test_the_task_list_offers_the_filter_and_does_not_claim_a_calibration_before_any_probe(
    client, alice, arithmetic, tasks, model
):
    client.force_login(alice)
    page = client.get(reverse("task_list"), {"environment": "arithmetic", "status": "submitted"}).content.decode()
    assert "none probed with probe yet" in page and "calibrated by" not in page
    assert 'value="filter"' in page and 'name="status" value="submitted"' in page


def test_back_links_stay_on_this_site(client, alice, arithmetic, tasks, model):
    response = post(client, alice, scope="sample", sample_size="0", next="https://elsewhere.example/")
    assert response.status_code == 302 and response.url == "/"
