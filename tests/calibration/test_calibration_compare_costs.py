"""The model comparison page and its JSON, and spend per environment summed from rollout rows."""

from decimal import Decimal

import pytest

from calibration import selectors, services
from calibration.models import Band, Calibration, Outcome, Rollout
from curation.models import Task, TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

FIRST = {
    "a": (0.0, "too_hard"),
    "b": (0.2, "in_band"),
    "c": (0.5, "in_band"),
    "d": (0.9, "retire"),
    "e": (0.3, "in_band"),
}
SECOND = {"a": (0.05, "in_band"), "b": (0.4, "in_band"), "c": (0.8, "retire"), "d": (1.0, "retire")}  # e: not probed


@pytest.fixture
def two_models(arithmetic, alice):
    import_tasks(
        arithmetic, alice, *[math_task(key, f"What is {index} + 1?", str(index + 1)) for index, key in enumerate(FIRST)]
    )
    models = [
        services.probe_model_add(name=name, backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
        for name in ("small", "large")
    ]
    for model, calibrations in zip(models, (FIRST, SECOND)):
        for key, (rate, band) in calibrations.items():
            Calibration.objects.create(
                task_version=Task.objects.get(key=key).current_version,
                probe_model=model,
                attempts=32,
                successes=round(32 * rate),
                pass_rate=rate,
                band=band,
            )
    return models


def test_comparison_json_aggregates_pairs(client, alice, arithmetic, two_models):
    client.force_login(alice)
    data = client.get("/models/compare.json", {"environment": "arithmetic", "first": "small", "second": "large"}).json()
    assert data["tasks"] == 4 and data["points"]["key"] == ["a", "b", "c", "d"]
    assert data["points"]["second"] == [0.05, 0.4, 0.8, 1.0]
    assert data["spearman"] == pytest.approx(1.0)
    assert data["band_agreement"]["tasks"] == 4 and data["band_agreement"]["agreement"] == pytest.approx(0.5)
    assert {"first": "in_band", "second": "retire", "count": 1} in data["band_agreement"]["counts"]
    page = client.get("/models/compare/", {"environment": "arithmetic", "first": "small", "second": "large"})
    assert page.status_code == 200 and b"model-compare-scatter" in page.content and b"model_compare.js" in page.content
    assert (
        client.get(
            "/models/compare.json", {"environment": "arithmetic", "first": "small", "second": "nope"}
        ).status_code
        == 404
    )


def test_comparison_needs_a_login(client):
    assert client.get("/models/compare.json").status_code in (302, 403)


def test_costs_sum_rollouts_and_versions_without_double_counting(client, arithmetic, alice, two_models):
    small, large = two_models
    # Task "b" gets a second version: both versions' authoring cost was spent.
    import_tasks(arithmetic, alice, math_task("b", "What is 1 + 1, again?", "2", authoring_cost_usd=100))
    campaign_small = services.campaign_start(environment=arithmetic, probe_model=small, created_by=alice, enqueue=False)
    campaign_large = services.campaign_start(environment=arithmetic, probe_model=large, created_by=alice, enqueue=False)
    rows = []
    for campaign in (campaign_small, campaign_large):
        for task in Task.objects.filter(environment=arithmetic):
            for version in task.versions.all():
                for index in range(3):  # $0.01 per rollout
                    rows.append(
                        Rollout(
                            campaign=campaign,
                            task_version=version,
                            probe_model=campaign.probe_model,
                            sample_index=index,
                            seed=index,
                            outcome=Outcome.FAIL,
                            cost_usd=Decimal("0.01"),
                        )
                    )
    Rollout.objects.bulk_create(rows)
    Task.objects.filter(key="d").update(status=TaskStatus.RETIRED)
    # The new version of "b" is in band under the large model; "e" has no calibration there.
    Calibration.objects.create(
        task_version=Task.objects.get(key="b").current_version,
        probe_model=large,
        attempts=8,
        successes=2,
        pass_rate=0.25,
        band=Band.IN_BAND,
    )

    costs = selectors.environment_costs(environment=arithmetic, probe_model=large)
    versions = 6  # five tasks, one with two versions
    assert costs["tasks"] == 5
    assert costs["authoring_usd"] == pytest.approx(5 * 250 + 100)
    assert costs["probe_usd"] == pytest.approx(versions * 2 * 3 * 0.01)
    assert costs["total_usd"] == pytest.approx(1350 + 0.36)
    # In band under "large": b (current version) only; c is retire, a is in band, d retired.
    assert costs["in_band_tasks"] == 2  # a and b
    assert costs["in_band_usd"] == pytest.approx(250 + 0.06 + 350 + 0.12)
    # Per in-band task: the authoring of the probed tasks ("e" never was, under "large") plus all probing.
    assert costs["probed_tasks"] == 4
    assert costs["cost_per_in_band_task_usd"] == pytest.approx((1350 - 250 + 0.36) / 2)
    assert costs["waste_tasks"] == 2 and costs["waste_usd"] == pytest.approx(
        2 * (250 + 0.06)
    )  # c (retire), d (retired)
    client.force_login(alice)
    assert client.get("/environments/arithmetic/costs.json", {"model": "large"}).json() == pytest.approx(costs)
    assert selectors.task_cost(task=Task.objects.get(key="b")) == pytest.approx(
        {"authoring_usd": 350.0, "probe_usd": 0.12, "total_usd": 350.12}
    )
