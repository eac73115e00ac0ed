"""The dashboard's checkpoints card: bands per checkpoint of a run, band movement between consecutive
checkpoints, the in-band pool's forecast, the re-profile action (who may press it, and for which release's
tasks), and where the checkpoint's re-profiles stand."""

from unittest import mock

import pytest
from django.urls import reverse

from calibration import selectors, services
from calibration.models import Calibration, Campaign, ProbeModel, Reprofile
from tests.factories import checkpoint_run, import_tasks, math_task, pinned_release, sample_finished

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
    assert prior["logit_sd_range"] == [0.4, 0.4]  # a re-profile stored before the spreads: the median alone
    # With the tasks' spreads, the curve is their mixture: a tenth of the tasks too vague to predict
    # are probed in the middle of the band too.
    Calibration.objects.filter(probe_model=third).update(policy={**PREDICTED_POLICY, "logit_sds": [0.4] * 9 + [3.0]})
    mixed = client.get(url, {"environment": "arithmetic"}).json()["prior"]
    assert mixed["logit_sd_range"] == [0.4, 3.0]
    assert (
        mixed["expected_rollouts"][middle]
        > prior["expected_rollouts"][middle] + 0.05 * body["expected_rollouts"][middle]
    )


def dashboard(client, model: str) -> str:
    return client.get(reverse("dashboard"), {"environment": "arithmetic", "model": model}).content.decode()


def reprofiles_panel(page: str) -> str:
    return page.split('id="reprofiles"')[1].split("</section>")[0]


def test_the_reprofile_form_takes_a_release_its_user_may_see(client, alice, bob, arithmetic):
    first, _ = checkpoint_run(arithmetic, alice)
    pinned = [task.current_version for task in arithmetic.tasks.order_by("key")[:6]]
    mine = pinned_release(alice, first, pinned, environment=arithmetic)
    reviewers = pinned_release(bob, first, pinned, environment=arithmetic)  # alice may not see it
    empty = pinned_release(alice, first, [], environment=arithmetic)
    url = reverse("checkpoint_reprofile", args=["arithmetic"])
    client.force_login(alice)
    form = dashboard(client, "ckpt-2").split('id="reprofile-form"')[1].split("</form>")[0]
    assert '<option value="">current tasks</option>' in form
    assert f'<option value="{mine.pk}">release {mine.pk}: ckpt-1' in form
    assert f'value="{reviewers.pk}"' not in form and f'value="{empty.pk}"' not in form  # hidden; pins nothing
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        # The API's answers: a release alice may not see, or none at all, is a 404; one that pins nothing
        # of the environment says so.
        assert client.post(url, {"model": "ckpt-2", "release": reviewers.pk}).status_code == 404
        assert client.post(url, {"model": "ckpt-2", "release": 10**9}).status_code == 404
        assert client.post(url, {"model": "ckpt-2", "release": "x"}).status_code == 404
        refused = client.post(url, {"model": "ckpt-2", "release": empty.pk}, follow=True).content.decode()
        assert f"Could not re-profile: Release {empty.pk} pins no task of arithmetic." in refused
        assert not Reprofile.objects.exists() and not Campaign.objects.exists()
        # A reviewer may see the release but may not probe the environment.
        client.force_login(bob)
        assert client.post(url, {"model": "ckpt-2", "release": mine.pk}).status_code == 403
        assert not Reprofile.objects.exists()
        client.force_login(alice)
        response = client.post(url, {"model": "ckpt-2", "release": mine.pk}, follow=True)
    reprofile = Reprofile.objects.get()
    assert reprofile.release_id == mine.pk and reprofile.task_version_ids == sorted(version.pk for version in pinned)
    assert reprofile.sample_campaign.items.count() == 6  # a sample of 50 is all six pinned tasks
    assert f"Campaign {reprofile.sample_campaign_id} probes a sample of 6 tasks" in response.content.decode()
    assert f"of the tasks release {mine.pk} pins" in reprofiles_panel(response.content.decode())


def test_the_dashboard_shows_where_each_reprofile_stands(client, alice, arithmetic):
    first, second = checkpoint_run(arithmetic, alice)
    client.force_login(alice)
    assert "No re-profile of arithmetic for ckpt-2 yet." in reprofiles_panel(dashboard(client, "ckpt-2"))

    # Probing the sample: its campaign, with a link to its progress.
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        reprofile = services.checkpoint_reprofile(
            environment=arithmetic, probe_model=second, created_by=alice, sample=4, seed=1
        )
    campaign = reprofile.sample_campaign
    panel = reprofiles_panel(dashboard(client, "ckpt-2"))
    assert f"Re-profile {reprofile.pk}</strong> of the current tasks" in panel
    assert "Probing the sample: 4 tasks," in panel
    assert f'<a href="/campaigns/{campaign.pk}/">campaign {campaign.pk}</a> (0 of 4 done, running)' in panel
    assert "When it is done, the bands are predicted by themselves." in panel
    assert "model check" not in panel

    # The sample done, a worker's next step failed: the error, and no promise of a next step.
    sample_finished(campaign, second)
    services.campaign_finish_if_done(campaign_id=campaign.pk)
    services.reprofile_mark_failed(reprofile_id=reprofile.pk, reason="Environment 'arithmetic' has no tasks.")
    panel = reprofiles_panel(dashboard(client, "ckpt-2"))
    assert "(4 of 4 done, done)" in panel
    assert "A worker could not take the next step: Environment &#x27;arithmetic&#x27; has no tasks." in panel
    assert "the bands are predicted next" not in panel

    # Pressed again, the step runs: four sampled tasks are too few to test the model, so it is not trusted,
    # no band is predicted and the other eight are probed.
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        reprofile = services.checkpoint_reprofile(environment=arithmetic, probe_model=second, created_by=alice)
    assert reprofile.stage == Reprofile.Stage.REPROFILE and not reprofile.model_check["trusted"]
    panel = reprofiles_panel(dashboard(client, "ckpt-2"))
    probing = reprofile.reprofile_campaign
    assert (
        f'Predicted: 0 of 12 bands predicted, 8 probed by\n      <a href="/campaigns/{probing.pk}/">'
        f"campaign {probing.pk}</a> (0 of 8 done, running)." in panel
    )
    assert (
        "The model check did not trust the prediction, so no band was predicted and every task was probed: "
        "only 4 sampled tasks could be checked, too few to test the model (it takes 10)" in panel
    )
    assert "A worker could not take the next step" not in panel
    assert '<p class="model-check warning">' in panel


def test_the_model_check_in_plain_words():
    check = {"checked": 50, "worst_z": 2.1, "critical_z": 3.29, "outliers": 0, "sum_z2": 48.0}
    check |= {"critical_sum_z2": 74.2, "misfit_sd": 0.25, "trusted": True}
    verdict = selectors.model_check_verdict(check)
    assert verdict["trusted"] and verdict["reasons"] == [
        "each of the 50 sampled tasks, predicted without its own results, came out within the limit "
        "(worst z 2.1, limit 3.29) and together within chance (sum of z² 48.0, limit 74.2)",
        "every prediction was widened by 0.25 logits for the spread the sample showed",
    ]
    verdict = selectors.model_check_verdict(check | {"outliers": 1, "worst_z": 4.2, "trusted": False})
    assert not verdict["trusted"] and verdict["reasons"] == [
        "1 of the 50 sampled tasks was far from its prediction (made without its own results; z 4.2, limit 3.29)"
    ]
    verdict = selectors.model_check_verdict(check | {"outliers": 3, "sum_z2": 90.5, "trusted": False})
    assert verdict["reasons"] == [
        "3 of the 50 sampled tasks were far from their predictions (made without their own results; worst z 2.1, "
        "limit 3.29)",
        "the sample as a whole missed its predictions by more than chance allows (sum of z² 90.5, limit 74.2)",
    ]
    verdict = selectors.model_check_verdict(check | {"checked": 6, "trusted": False})
    assert verdict["reasons"] == ["only 6 sampled tasks could be checked, too few to test the model (it takes 10)"]
    assert selectors.model_check_verdict(None) is None
