"""Dashboard endpoints: figures computed in the database, checked against hand-made data."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from calibration.models import (
    Band,
    Calibration,
    Campaign,
    CampaignItem,
    ProbeModel,
    Rollout,
)
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

ENDPOINTS = ["bands_over_time_data", "cost_data", "verifier_latency_data", "campaigns_progress_data"]


@pytest.fixture
def data(alice, arithmetic):
    model = ProbeModel.objects.create(name="probe", backend="openai")
    import_tasks(
        arithmetic,
        alice,
        *[
            math_task(f"t-{i}", question=f"What is {i} + 1?", answer=str(i + 1), authoring_cost_usd=10)
            for i in range(4)
        ],
    )
    tasks = list(arithmetic.tasks.order_by("key"))
    bands = [Band.IN_BAND, Band.IN_BAND, Band.TOO_HARD, Band.RETIRE]
    for task, band in zip(tasks, bands):
        Calibration.objects.create(
            task_version=task.current_version, probe_model=model, band=band, cost_usd="2", attempts=8
        )
    campaign = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)
    CampaignItem.objects.bulk_create(
        [
            CampaignItem(campaign=campaign, task_version=task.current_version, done=index < 3)
            for index, task in enumerate(tasks)
        ]
    )
    now = timezone.now()
    outcomes = ["pass", "fail", "fail", "error", "timeout", "pass", "fail", "pass", "fail", "pass"]
    Rollout.objects.bulk_create(
        [
            Rollout(
                campaign=campaign,
                task_version=tasks[0].current_version,
                probe_model=model,
                sample_index=index,
                seed=index,
                outcome=outcome,
                verify_ms=float(index + 1),
                verified_at=now - timedelta(minutes=5),
                cost_usd="0.2",
            )
            for index, outcome in enumerate(outcomes)
        ]
        + [
            Rollout(
                campaign=campaign,
                task_version=tasks[1].current_version,
                probe_model=model,
                sample_index=0,
                seed=0,
                outcome="pass",
                verify_ms=500.0,
                verified_at=now - timedelta(days=3),
                cost_usd="2",
            )
        ]
        # Probing spend is the rollouts' cost: $2 per task in all.
        + [
            Rollout(
                campaign=campaign,
                task_version=task.current_version,
                probe_model=model,
                sample_index=0,
                seed=0,
                cost_usd="2",
            )
            for task in tasks[2:]
        ]
    )
    return model


@pytest.mark.parametrize("name", ENDPOINTS)
def test_endpoints_need_a_browser_user(client, alice, charlie, name):
    url = reverse(name)
    assert client.get(url).status_code == 302
    client.force_login(charlie)
    assert client.get(url).status_code == 403
    client.force_login(alice)
    assert client.get(url).status_code == 200


def test_cost_per_task_per_in_band_task_and_waste(client, alice, data):
    client.force_login(alice)
    body = client.get(reverse("cost_data"), {"model": "probe"}).json()
    (row,) = body["environments"]
    assert (row["tasks"], row["in_band"]) == (4, 2)
    assert row["cost_per_task_usd"] == pytest.approx(12.0)  # 10 authoring + 2 probing
    assert row["cost_per_in_band_task_usd"] == pytest.approx(24.0)
    assert body["spent_usd"] == pytest.approx(48.0) and body["wasted_usd"] == pytest.approx(24.0)
    assert {row["band"]: row["tasks"] for row in body["bands"]} == {"in_band": 2, "too_hard": 1, "retire": 1}


def test_a_model_filter_counts_only_that_models_calibrations(client, alice, data, arithmetic):
    other = ProbeModel.objects.create(name="other", backend="openai")
    for task in arithmetic.tasks.all():
        Calibration.objects.create(
            task_version=task.current_version, probe_model=other, band=Band.TOO_HARD, cost_usd="100"
        )
    client.force_login(alice)
    (row,) = client.get(reverse("cost_data"), {"model": "probe"}).json()["environments"]
    assert (row["tasks"], row["in_band"], row["probing_usd"]) == (4, 2, pytest.approx(8.0))
    (row,) = client.get(reverse("cost_data"), {"model": "other"}).json()["environments"]
    # Bands follow the chosen model; the money spent on each task is the same whichever model is shown.
    assert (row["tasks"], row["in_band"], row["probing_usd"]) == (4, 0, pytest.approx(8.0))
    series = client.get(reverse("bands_over_time_data"), {"model": "other"}).json()["series"]
    assert [(s["band"], s["counts"][-1]) for s in series] == [("too_hard", 4)]


def test_bands_over_time_is_cumulative_per_environment_and_band(client, alice, data):
    client.force_login(alice)
    body = client.get(reverse("bands_over_time_data"), {"days": "7"}).json()
    # The axis fits the data: from the day before the first change to today, not the whole window.
    today = timezone.now().date()
    assert body["days"] == [(today - timedelta(days=1)).isoformat(), today.isoformat()]
    last = {(s["environment"], s["band"]): s["counts"][-1] for s in body["series"]}
    assert last == {("arithmetic", "in_band"): 2, ("arithmetic", "too_hard"): 1, ("arithmetic", "retire"): 1}


def test_verifier_latency_percentiles_and_error_rate_cover_the_window(client, alice, data):
    client.force_login(alice)
    body = client.get(reverse("verifier_latency_data"), {"hours": "24"}).json()
    assert body["verdicts"] == 10 and body["errors"] == 1 and body["timeouts"] == 1
    assert body["error_rate_overall"] == pytest.approx(0.2)
    assert body["p50"] == [pytest.approx(5.5)]  # percentile_cont of 1..10 ms; the 500 ms row is outside
    body = client.get(reverse("verifier_latency_data"), {"hours": "96"}).json()
    assert body["verdicts"] == 11


def test_campaign_progress(client, alice, data):
    client.force_login(alice)
    (campaign,) = client.get(reverse("campaigns_progress_data")).json()["campaigns"]
    assert (campaign["items_done"], campaign["items_total"], campaign["percent"]) == (3, 4, 75)


def test_dashboard_page_has_every_chart(client, alice, data):
    client.force_login(alice)
    page = client.get(reverse("dashboard")).content.decode()
    for element in (
        "pass-rate-histogram",
        "bands-over-time",
        "cost-per-task",
        "spend-by-band",
        "verifier-latency",
        "campaign-progress",
    ):
        assert f'id="{element}"' in page


def test_the_operating_characteristic_of_the_stopping_rule(client, alice, charlie, arithmetic):
    url = reverse("operating_characteristic_data")
    client.force_login(charlie)
    assert client.get(url, {"environment": "arithmetic"}).status_code == 403  # trainers use the API
    client.force_login(alice)
    assert client.get(url, {"environment": "nowhere"}).status_code == 404
    body = client.get(url, {"environment": "arithmetic"}).json()
    rates = body["pass_rates"]
    assert body["policy"] == {
        "kind": "adaptive",
        "description": "adaptive: rounds of 8, at most 256 rollouts, confidence 0.95",
        "round_size": 8,
        "cap": 256,
        "confidence": 0.95,
        "from_campaign": None,
        "undecided_label": "P(borderline at the cap)",
    }
    for index in range(len(rates)):
        total = sum(body["labels"][band][index] for band in ("too_hard", "in_band", "retire", "borderline"))
        assert total == pytest.approx(1.0, abs=1e-6)
        assert 0 < body["expected_rollouts"][index] <= 256
    # Far from the thresholds the rule is almost always right; tasks that never pass end too_hard.
    assert body["labels"]["too_hard"][rates.index(0.0)] > 0.99
    assert body["wrong"][rates.index(0.3)] < 0.01 and body["labels"]["in_band"][rates.index(0.3)] > 0.99


def test_the_promise_card_shows_the_policy_the_campaigns_used(client, alice, arithmetic):
    """Fixed-4 campaigns: the card is about fixed N = 4, where most tasks end undecided, not the adaptive rule."""
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    campaign = Campaign.objects.create(
        environment=arithmetic, probe_model=model, created_by=alice, seed=1, policy="fixed", max_rollouts=4
    )
    client.force_login(alice)
    body = client.get(reverse("operating_characteristic_data"), {"environment": "arithmetic"}).json()
    assert body["policy"]["kind"] == "fixed" and body["policy"]["from_campaign"] == campaign.pk
    assert body["policy"]["cap"] == 4 and body["policy"]["undecided_label"] == "P(undecided after 4)"
    assert max(body["expected_rollouts"]) == pytest.approx(4.0)
    # A task at 50% is left undecided by 4 attempts unless exactly one passes (4/16 of the time).
    half = body["pass_rates"].index(0.5)
    assert body["labels"]["borderline"][half] == pytest.approx(0.75)
    page = client.get(reverse("dashboard"), {"environment": "arithmetic"}).content.decode()
    assert "Policy: fixed N = 4 rollouts per task" in page and f"campaign #{campaign.pk}, the latest here" in page


def test_the_environment_picker_filters_every_chart(client, alice, data, arithmetic):
    from curation.services import environment_create

    other = environment_create(name="other", domain="math")
    import_tasks(other, alice, math_task("o-1"))
    Calibration.objects.create(
        task_version=other.tasks.get().current_version, probe_model=data, band=Band.TOO_HARD, cost_usd="1"
    )
    Campaign.objects.create(environment=other, probe_model=data, created_by=alice, seed=2)
    client.force_login(alice)
    page = client.get(reverse("dashboard"), {"environment": "arithmetic", "model": "probe"}).content.decode()
    for name in ENDPOINTS:
        assert f"{reverse(name)}?environment=arithmetic&model=probe" in page
    query = {"environment": "arithmetic", "model": "probe"}
    series = client.get(reverse("bands_over_time_data"), query).json()["series"]
    assert {s["environment"] for s in series} == {"arithmetic"}
    assert [row["environment"] for row in client.get(reverse("cost_data"), query).json()["environments"]] == [
        "arithmetic"
    ]
    assert [
        c["label"].split(" ")[1] for c in client.get(reverse("campaigns_progress_data"), query).json()["campaigns"]
    ] == ["arithmetic"]
    assert client.get(reverse("verifier_latency_data"), {"environment": "other"}).json()["verdicts"] == 0


def test_verifier_latency_axis_spans_the_window_in_whole_hours(client, alice, data):
    client.force_login(alice)
    body = client.get(reverse("verifier_latency_data"), {"hours": "24"}).json()
    since, until = (timezone.datetime.fromisoformat(body[name]) for name in ("since", "until"))
    assert since.minute == until.minute == since.second == 0 and timedelta(hours=24) <= until - since <= timedelta(
        hours=26
    )
