"""The dashboard's checkpoints card: bands per checkpoint of a run, band movement between consecutive
checkpoints, the in-band pool's forecast, and the re-profile action (who may press it)."""

from unittest import mock

import pytest
from django.urls import reverse

from calibration import selectors
from calibration.models import Calibration, Campaign, ProbeModel
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

# As calibration.services.checkpoints stores it on a predicted band.
PREDICTED_POLICY = {"kind": "predicted", "checkpoints": ["ckpt-1", "ckpt-2"], "logit_sd": 0.4, "level": 0.95}

# Ten tasks' bands under three checkpoints: the policy improves, tasks move towards retire.
BANDS = {
    "ckpt-1": ["too_hard"] * 6 + ["in_band"] * 4,
    "ckpt-2": ["too_hard"] * 3 + ["in_band"] * 5 + ["retire"] * 2,
    "ckpt-3": ["too_hard"] * 1 + ["in_band"] * 3 + ["retire"] * 6,
}


@pytest.fixture
def run(alice, arithmetic):
    import_tasks(
        arithmetic, alice, *[math_task(f"t-{index}", f"What is {index} + 3?", str(index + 3)) for index in range(10)]
    )
    versions = [task.current_version for task in arithmetic.tasks.order_by("key")]
    for step, (name, bands) in enumerate(BANDS.items(), start=1):
        model = ProbeModel.objects.create(
            name=name, backend="openai", base_url="http://127.0.0.1:9/v1", run="run-a", checkpoint_step=step * 100
        )
        for index, (version, band) in enumerate(zip(versions, bands)):
            predicted = name == "ckpt-3" and index % 2 == 0
            Calibration.objects.create(
                task_version=version,
                probe_model=model,
                attempts=0 if predicted else 16,
                band=band,
                decided=True,
                predicted_probability=0.99 if predicted else None,
                policy=PREDICTED_POLICY if predicted else {},
            )
    return arithmetic


def test_band_movement_between_checkpoints_and_the_pool_forecast(run):
    movement = selectors.checkpoint_movement(environment=run, run="run-a")
    assert [row["bands"]["in_band"] for row in movement["checkpoints"]] == [4, 5, 3]
    assert [row["predicted"] for row in movement["checkpoints"]] == [0, 0, 5]
    first, second = movement["movements"]
    cells = {(cell["from"], cell["to"]): cell["tasks"] for cell in first["cells"]}
    assert cells == {
        ("too_hard", "too_hard"): 3,
        ("too_hard", "in_band"): 3,
        ("in_band", "in_band"): 2,
        ("in_band", "retire"): 2,
    }
    assert (first["left_band"], first["entered_band"]) == (2, 3)
    assert (second["left_band"], second["entered_band"]) == (4, 2)
    # A line through (100, 4), (200, 5), (300, 3): slope -0.005 per step, zero at step 1000.
    assert movement["forecast"]["slope"] == pytest.approx(-0.005)
    assert movement["forecast"]["empty_at_step"] == pytest.approx(1000)
    assert selectors.checkpoint_movement(environment=run, run="no-such-run") is None


def test_the_dashboard_shows_the_movement_for_a_checkpoint(client, alice, run):
    client.force_login(alice)
    page = client.get(reverse("dashboard"), {"environment": "arithmetic", "model": "ckpt-2"}).content.decode()
    assert "Checkpoints of run run-a" in page
    assert "ckpt-1 → ckpt-2: 2 left the band, 3 entered it" in page
    assert "ckpt-2 → ckpt-3: 4 left the band, 2 entered it" in page
    assert "runs out at step 1000" in page
    assert "<script>" not in page.split('id="checkpoint-movement"')[1].split("</section>")[0]
    ProbeModel.objects.create(name="plain", backend="openai", base_url="http://127.0.0.1:9/v1")
    page = client.get(reverse("dashboard"), {"environment": "arithmetic", "model": "plain"}).content.decode()
    assert "Checkpoints of run" not in page


def test_reprofile_is_for_authors_and_probes_a_sample_first(client, alice, bob, run):
    ProbeModel.objects.create(
        name="ckpt-4", backend="openai", base_url="http://127.0.0.1:9/v1", run="run-a", checkpoint_step=400
    )
    url = reverse("checkpoint_reprofile", args=["arithmetic"])
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        client.force_login(bob)
        assert client.post(url, {"model": "ckpt-4"}).status_code == 403
        assert not Campaign.objects.exists()
        client.force_login(alice)
        response = client.post(url, {"model": "ckpt-4"}, follow=True)
    campaign = Campaign.objects.get()
    assert campaign.probe_model.name == "ckpt-4" and campaign.items.count() == 10  # a sample of 20 is all ten
    assert f"Campaign {campaign.pk} probes a sample of 10 tasks" in response.content.decode()
    # A model that is no checkpoint says so.
    ProbeModel.objects.create(name="plain", backend="openai", base_url="http://127.0.0.1:9/v1")
    response = client.post(url, {"model": "plain"}, follow=True)
    assert "is not a checkpoint of a run" in response.content.decode()


def test_the_operating_characteristic_with_and_without_the_checkpoint_prior(client, alice, run):
    client.force_login(alice)
    url = reverse("operating_characteristic_data")
    plain = ProbeModel.objects.create(name="plain", backend="openai", base_url="http://127.0.0.1:9/v1")
    Campaign.objects.create(environment=run, probe_model=plain, created_by=alice, seed=1, policy="adaptive")
    assert client.get(url, {"environment": "arithmetic"}).json()["prior"] is None  # no checkpoint: no prior
    third = ProbeModel.objects.get(name="ckpt-3")
    Campaign.objects.create(
        environment=run, probe_model=third, created_by=alice, seed=2, policy="adaptive", max_rollouts=72
    )
    body = client.get(url, {"environment": "arithmetic"}).json()
    prior = body["prior"]
    assert (
        prior["probe_model"] == "ckpt-3" and prior["logit_sd"] == 0.4 and prior["checkpoints"] == ["ckpt-1", "ckpt-2"]
    )
    middle = body["pass_rates"].index(0.2)
    # In the middle of the band the prediction is sure: no rollouts, where the rule alone spends some.
    assert prior["expected_rollouts"][middle] < 1 < body["expected_rollouts"][middle]
    floor = body["pass_rates"].index(0.02)
    assert prior["expected_rollouts"][floor] == pytest.approx(body["expected_rollouts"][floor], rel=0.2)
