"""GET /api/v1/tasks filters, /api/v1/calibrations and /api/v1/rollouts (token ids and logprobs)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import api_token_create
from calibration.models import Calibration, Campaign, Rollout
from curation.models import Task
from engine import packing
from tests.releases.export_data import calibrated_environment

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(arithmetic, alice):
    return calibrated_environment(arithmetic, alice)


@pytest.fixture
def secret(charlie):
    return api_token_create(user=charlie, name="trainer", scopes=["read"])[1]


def get(client, url, secret, **params):
    return client.get(url, params, HTTP_AUTHORIZATION=f"Bearer {secret}")


def keys(response):
    assert response.status_code == 200, response.content
    return sorted(row.get("key") or row.get("task") for row in response.json()["results"])


def test_task_filters(client, secret, model, arithmetic):
    url = "/api/v1/tasks"
    assert keys(get(client, url, secret, model="probe", pass_rate_min=0.3)) == ["capital", "sum"]
    assert keys(get(client, url, secret, model="probe", pass_rate_max=0.3)) == ["product"]
    assert keys(get(client, url, secret, model="probe", domain="math", band="in_band")) == ["product", "sum"]
    Calibration.objects.filter(task_version__task__key="sum").update(flags=["verifier_trouble"])
    assert keys(get(client, url, secret, model="probe", flag="verifier_trouble")) == ["sum"]
    Task.objects.filter(key="capital").update(updated_at=timezone.now() + timedelta(days=1))
    tomorrow = (timezone.now() + timedelta(hours=12)).isoformat()
    assert keys(get(client, url, secret, updated_since=tomorrow)) == ["capital"]


def test_bad_filter_values_name_the_parameter(client, secret, model):
    for params, field in (
        ({"pass_rate_min": "lots"}, "pass_rate_min"),
        ({"status": "sleeping"}, "status"),
        ({"updated_since": "yesterday"}, "updated_since"),
        ({"band": "hot"}, "band"),
    ):
        response = get(client, "/api/v1/tasks", secret, **params)
        assert response.status_code == 400 and field in response.json()["fields"]


def test_cursor_pagination_walks_every_task_once(client, secret, model, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "PAGE_SIZE": 1}
    seen, url = [], "/api/v1/tasks?model=probe"
    while url:
        body = client.get(url, HTTP_AUTHORIZATION=f"Bearer {secret}").json()
        seen += [row["key"] for row in body["results"]]
        url = body["next"]
    assert sorted(seen) == ["capital", "product", "sum", "tool-add"]


def test_calibrations_list(client, secret, model):
    body = get(client, "/api/v1/calibrations", secret, band="in_band").json()
    assert sorted(row["task"] for row in body["results"]) == ["product", "sum"]
    assert body["results"][0]["probe_model"] == "probe" and body["results"][0]["interval"] == [0.1, 0.9]


def test_rollouts_come_with_token_ids_and_logprobs(client, secret, model, arithmetic, alice):
    campaign = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=7)
    version = arithmetic.tasks.get(key="sum").current_version
    Rollout.objects.create(
        campaign=campaign,
        task_version=version,
        probe_model=model,
        sample_index=0,
        seed=7,
        prompt_token_ids=packing.pack_tokens([1, 2, 3]),
        completion_token_ids=packing.pack_tokens([20, 21]),
        logprobs=packing.pack_logprobs([-0.5, -0.25]),
        text="5",
        outcome="pass",
        reward=1.0,
    )
    body = get(client, "/api/v1/rollouts", secret, task="sum").json()
    (rollout,) = body["results"]
    assert rollout["prompt_token_ids"] == [1, 2, 3] and rollout["completion_token_ids"] == [20, 21]
    assert rollout["logprobs"] == [-0.5, -0.25] and rollout["outcome"] == "pass"
    assert get(client, "/api/v1/rollouts", secret, outcome="fail").json()["results"] == []
    assert get(client, "/api/v1/rollouts", secret, outcome="bogus").status_code == 400


def test_lists_need_the_read_scope(client, charlie, model):
    _, export_only = api_token_create(user=charlie, name="e", scopes=["export"])
    for url in ("/api/v1/tasks", "/api/v1/calibrations", "/api/v1/rollouts"):
        assert get(client, url, export_only).status_code == 403
        assert client.get(url).status_code == 401


def test_each_token_has_its_own_rate_limit(client, charlie, model, settings):
    from django.core.cache import cache

    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "2/minute"}}
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    original_rates = SimpleRateThrottle.THROTTLE_RATES
    # DRF reads the rates once, into a class attribute; point it at the overridden ones for this test.
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    try:
        _, first = api_token_create(user=charlie, name="a", scopes=["read"])
        _, second = api_token_create(user=charlie, name="b", scopes=["read"])
        assert [get(client, "/api/v1/calibrations", first).status_code for _ in range(3)] == [200, 200, 429]
        assert get(client, "/api/v1/calibrations", second).status_code == 200
    finally:
        SimpleRateThrottle.THROTTLE_RATES = original_rates
        cache.clear()
