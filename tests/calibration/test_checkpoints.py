"""Checkpoints of one run: a new checkpoint is re-profiled by probing only the tasks whose band the
item-response model leaves uncertain, through the real campaign machinery and real Celery workers.

The ladder's rungs are scripted model servers at known pass rates: task i under checkpoint k passes
with expit(ability[k] - difficulty[i]), a Rasch ladder, so the truth of every band is known.
"""

import contextlib
import math
from unittest import mock

import pytest
from django.urls import reverse

from calibration import selectors, services, tasks
from calibration.errors import CalibrationError
from calibration.models import Calibration, Campaign, CampaignItem, ProbeModel, Reprofile, Rollout
from engine import stats
from tests.calibration.scripted import import_scripted, scripted_model
from tests.factories import checkpoint_run, import_tasks, math_task, sample_finished
from tests.support.workers import flush_broker, running_worker, wait_for

TASKS = 40
ABILITIES = {"ckpt-1": -1.0, "ckpt-2": 0.0, "ckpt-3": 1.0}
STEPS = {"ckpt-1": 100, "ckpt-2": 200, "ckpt-3": 300}
KEYS = [f"t{index:02d}" for index in range(TASKS)]
# Difficulties spread from -7 to 7 logits: under ckpt-3, from certain retire through the band to too hard.
DIFFICULTY = {key: -7.0 + 14.0 * index / (TASKS - 1) for index, key in enumerate(KEYS)}
WORKER_ENV = {"PASSBAND_SERVER_RETRY_MAX_S": "1"}


def expit(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value))


def pass_rates(checkpoint: str) -> dict[str, float]:
    return {key: expit(ABILITIES[checkpoint] - DIFFICULTY[key]) for key in KEYS}


def true_band(environment, checkpoint: str, key: str) -> str:
    thresholds = stats.Thresholds.with_default_zones(floor=environment.floor, retire_at=environment.retire_at)
    return stats.band_for_rate(pass_rate=pass_rates(checkpoint)[key], thresholds=thresholds)


def far_from_thresholds(environment, checkpoint: str, key: str, margin: float = 1.5) -> bool:
    logit = ABILITIES[checkpoint] - DIFFICULTY[key]
    edges = [math.log(rate / (1 - rate)) for rate in (environment.floor, environment.retire_at)]
    return all(abs(logit - edge) > margin for edge in edges)


def wait_done(campaign):
    wait_for(
        lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
        timeout=300,
        what=f"campaign {campaign.pk}",
    )


def probe_in_full(environment, owner, probe_model, policy, rollouts):
    wait_done(
        services.campaign_start(
            environment=environment, probe_model=probe_model, created_by=owner, policy=policy, rollouts=rollouts, seed=3
        )
    )


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_a_new_checkpoint_probes_only_its_uncertain_tasks_and_the_dashboard_shows_the_movement(
    arithmetic, alice, client, tmp_path
):
    flush_broker()
    import_scripted(arithmetic, alice, KEYS)
    with (
        scripted_model("ckpt-1", pass_rates("ckpt-1"), run="run-a", checkpoint_step=STEPS["ckpt-1"]) as (first, _),
        scripted_model("ckpt-2", pass_rates("ckpt-2"), run="run-a", checkpoint_step=STEPS["ckpt-2"]) as (second, _),
        scripted_model("ckpt-3", pass_rates("ckpt-3"), run="run-a", checkpoint_step=STEPS["ckpt-3"]) as (third, _),
        scripted_model("ckpt-3-full", pass_rates("ckpt-3")) as (full, _),
        running_worker(concurrency=2, extra_env=WORKER_ENV, log_path=tmp_path / "worker.log"),
    ):
        with pytest.raises(CalibrationError, match="first checkpoint"):
            services.checkpoint_reprofile(environment=arithmetic, probe_model=first, created_by=alice)
        for checkpoint in (first, second):  # probed in full, as a run's first checkpoints are
            probe_in_full(arithmetic, alice, checkpoint, Campaign.Policy.FIXED, 24)
        # One call: the sample's campaign, then (by itself, once the sample is done) the second step.
        sample = services.checkpoint_reprofile(
            environment=arithmetic, probe_model=third, created_by=alice, sample=10, seed=3
        )
        assert sample.stage == "sample" and sample.probed == 10 and sample.campaign.items.count() == 10
        with pytest.raises(CalibrationError, match="takes its next step by itself"):
            services.checkpoint_reprofile(environment=arithmetic, probe_model=third, created_by=alice, sample=10)
        result = wait_for(
            lambda: Reprofile.objects.filter(
                pk=sample.pk, stage="reprofile", reprofile_campaign__status=Campaign.Status.DONE
            ).first(),
            timeout=300,
            what=f"re-profile {sample.pk} to predict and probe by itself",
        )
        assert result.sample_campaign_id == sample.campaign.pk and Reprofile.objects.count() == 1
        # The same checkpoint probed in full, under the same adaptive policy: what the re-profile saves.
        probe_in_full(arithmetic, alice, full, Campaign.Policy.ADAPTIVE, 72)

    # Fewer tasks probed than the release holds: the sample and the uncertain ones only.
    assert result.tasks == TASKS and result.predicted + result.probed + 10 == TASKS
    assert result.model_check["trusted"] and result.model_check["checked"] == 10
    # A sample of 10 cannot rule out much misfit, so every prediction is widened by it: fewer are sure.
    assert 0 < result.probed and result.predicted >= TASKS // 5
    probed_items = set(
        CampaignItem.objects.filter(campaign=result.campaign).values_list("task_version__task__key", flat=True)
    )
    assert len(probed_items) == result.probed
    assert 0.0 < result.ability < 4.0  # the truth, centred on ckpt-1: 2.0
    # Predicted bands are marked, with their probability, and right where the truth is far from a threshold.
    calibrations = {
        row.task_version.task.key: row
        for row in Calibration.objects.filter(probe_model=third).select_related("task_version__task")
    }
    assert len(calibrations) == TASKS
    predicted = {key: row for key, row in calibrations.items() if row.predicted_probability is not None}
    assert len(predicted) == result.predicted and not (predicted.keys() & probed_items)
    for row in predicted.values():
        assert row.attempts == 0 and row.predicted_probability >= 0.95 and row.policy["kind"] == "predicted"
        assert row.policy["checkpoints"] == ["ckpt-1", "ckpt-2"]
        # The tasks' own prediction uncertainties, for the dashboard's mixture: ten, around the median.
        spreads = row.policy["logit_sds"]
        assert len(spreads) == 10 and spreads == sorted(spreads) and spreads[0] <= row.policy["logit_sd"] <= spreads[-1]
    far = [key for key in predicted if far_from_thresholds(arithmetic, "ckpt-3", key)]
    assert far and all(predicted[key].band == true_band(arithmetic, "ckpt-3", key) for key in far)
    assert not Rollout.objects.filter(probe_model=third, task_version__task__key__in=list(predicted)).exists()
    spent, full_reprobe = (
        Rollout.objects.filter(probe_model=third).count(),
        Rollout.objects.filter(probe_model=full).count(),
    )
    assert spent < full_reprobe
    # Refreshing bands from rollouts (a threshold change) keeps the predicted ones.
    services.environment_calibrations_refresh(environment=arithmetic)
    assert Calibration.objects.filter(probe_model=third, predicted_probability__isnull=False).count() == len(predicted)

    movement = selectors.checkpoint_movement(environment=arithmetic, run="run-a")
    assert [row["name"] for row in movement["checkpoints"]] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert movement["checkpoints"][2]["predicted"] == result.predicted
    last = movement["movements"][1]
    assert sum(cell["tasks"] for cell in last["cells"]) == TASKS
    assert last["left_band"] > 0  # the policy improves: tasks leave the band for retire
    client.force_login(alice)
    page = client.get(reverse("dashboard"), {"environment": "arithmetic", "model": "ckpt-3"}).content.decode()
    assert "Checkpoints of run run-a" in page
    assert f"ckpt-2 → ckpt-3: {last['left_band']} left the band, {last['entered_band']} entered it" in page
    assert 'id="pool-forecast"' in page


@pytest.mark.django_db
def test_a_predicted_band_survives_a_refresh_and_gives_way_to_rollouts(arithmetic, alice):
    import_scripted(arithmetic, alice, ["always"])
    version = arithmetic.tasks.get(key="always").current_version
    with scripted_model("ckpt-9", {"always": 1.0}, run="run-b", checkpoint_step=900) as (model, _):
        Calibration.objects.create(
            task_version=version,
            probe_model=model,
            band="too_hard",
            decided=True,
            predicted_probability=0.97,
            policy={"kind": "predicted", "logit_sd": 0.5},
        )
        services.environment_calibrations_refresh(environment=arithmetic)
        kept = Calibration.objects.get(probe_model=model)
        assert (kept.band, kept.predicted_probability, kept.attempts) == ("too_hard", 0.97, 0)
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            policy=Campaign.Policy.ADAPTIVE,
            rollouts=16,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    probed = Calibration.objects.get(probe_model=model)
    assert probed.attempts > 0 and probed.predicted_probability is None and probed.band == "retire"


@pytest.fixture
def two_checkpoints(arithmetic, alice):
    return checkpoint_run(arithmetic, alice)


@pytest.fixture
def sampled(arithmetic, alice, two_checkpoints):
    """A re-profile of ckpt-2 started with a sample of 4 (its campaign's jobs not queued), the sample probed."""
    new = two_checkpoints[1]
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        reprofile = services.checkpoint_reprofile(
            environment=arithmetic, probe_model=new, created_by=alice, sample=4, seed=1
        )
    sample_finished(reprofile.sample_campaign, new)
    return reprofile


@contextlib.contextmanager
def continue_messages(django_capture_on_commit_callbacks):
    """The `continue_reprofile` messages queued in the block (once committed), as a mock; no campaign jobs."""
    with (
        mock.patch("calibration.services.campaigns.campaign_enqueue_pending"),
        mock.patch("calibration.tasks.continue_reprofile.delay") as queued,
        django_capture_on_commit_callbacks(execute=True),
    ):
        yield queued


@pytest.mark.django_db
def test_the_second_step_starts_once_when_the_sample_is_done(
    arithmetic, alice, sampled, django_capture_on_commit_callbacks
):
    reprofile, new = sampled, sampled.probe_model
    assert reprofile.stage == "sample" and reprofile.sample_campaign.items.count() == 4
    with continue_messages(django_capture_on_commit_callbacks) as queued:
        assert services.campaign_finish_if_done(campaign_id=reprofile.sample_campaign.pk)
        assert not services.campaign_finish_if_done(campaign_id=reprofile.sample_campaign.pk)
    queued.assert_called_once_with(reprofile.pk)
    # The message delivered twice (a worker killed after the step, before acknowledging): one campaign.
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        first = services.checkpoint_reprofile_continue(reprofile_id=reprofile.pk)
        second = services.checkpoint_reprofile_continue(reprofile_id=reprofile.pk)
    assert first.stage == second.stage == "reprofile" and first.reprofile_campaign_id == second.reprofile_campaign_id
    assert first.predicted + first.probed + 4 == first.tasks == 12
    assert Campaign.objects.filter(probe_model=new).count() == 1 + (first.probed > 0)
    assert Calibration.objects.filter(probe_model=new, predicted_probability__isnull=False).count() == first.predicted


@pytest.mark.django_db
def test_calling_again_takes_the_second_step_and_reconcile_takes_it_after_a_lost_worker(
    arithmetic, alice, sampled, django_capture_on_commit_callbacks
):
    reprofile, new = sampled, sampled.probe_model
    # The worker that finished the sample died before queueing the next step: beat's reconcile queues it.
    Campaign.objects.filter(pk=reprofile.sample_campaign.pk).update(status=Campaign.Status.DONE)
    with continue_messages(django_capture_on_commit_callbacks) as queued:
        services.campaigns_reconcile()
    queued.assert_called_once_with(reprofile.pk)
    # Pressing the button again before that message runs takes the step at once; the message then finds it taken.
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        again = services.checkpoint_reprofile(environment=arithmetic, probe_model=new, created_by=alice)
        late = services.checkpoint_reprofile_continue(reprofile_id=reprofile.pk)
    assert again.pk == late.pk == reprofile.pk and again.stage == late.stage == "reprofile"
    assert late.reprofile_campaign_id == again.reprofile_campaign_id
    assert Reprofile.objects.count() == 1
    with continue_messages(django_capture_on_commit_callbacks) as queued:
        services.campaigns_reconcile()
    queued.assert_not_called()


@pytest.mark.django_db
def test_a_second_step_that_cannot_run_is_recorded_and_not_queued_again(sampled, django_capture_on_commit_callbacks):
    reprofile = sampled
    services.campaign_finish_if_done(campaign_id=reprofile.sample_campaign.pk)
    Reprofile.objects.filter(pk=reprofile.pk).update(task_version_ids=[])  # its tasks are gone
    assert tasks.continue_reprofile(reprofile.pk) == "failed"
    reprofile.refresh_from_db()
    assert reprofile.stage == "sample" and "has no tasks to re-profile" in reprofile.error
    with continue_messages(django_capture_on_commit_callbacks) as queued:
        services.campaigns_reconcile()
    queued.assert_not_called()


def ladder_checkpoints(environment, owner, *, new_order):
    """48 math tasks on a Rasch ladder, probed by ckpt-1 and ckpt-2 of run-d (32 attempts each, passes as
    expected); ckpt-3 re-profiled with a sample of 24 whose results follow `new_order` (the task indices as
    ckpt-3 ranks them, easiest last). Returns the re-profile after its second step."""
    tasks = 48
    import_tasks(environment, owner, *[math_task(f"t-{i:02d}", f"What is {i} + 2?", str(i + 2)) for i in range(tasks)])
    difficulty = [-4.0 + 9.0 * index / (tasks - 1) for index in range(tasks)]
    models = [
        ProbeModel.objects.create(
            name=f"ckpt-{step}", backend="openai", base_url="http://127.0.0.1:9/v1", run="run-d", checkpoint_step=step
        )
        for step in (1, 2, 3)
    ]
    versions = [task.current_version for task in environment.tasks.order_by("key")]
    for ability, model in zip((-0.5, 0.5), models):
        for index, version in enumerate(versions):
            successes = round(32 * expit(ability - difficulty[index]))
            Calibration.objects.create(task_version=version, probe_model=model, attempts=32, successes=successes)
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        reprofile = services.checkpoint_reprofile(
            environment=environment, probe_model=models[2], created_by=owner, sample=24, seed=5
        )
        for item in reprofile.sample_campaign.items.select_related("task_version"):
            index = versions.index(item.task_version)
            successes = round(32 * expit(1.5 - difficulty[new_order[index]]))
            Calibration.objects.create(
                task_version=item.task_version, probe_model=models[2], attempts=32, successes=successes
            )
        reprofile.sample_campaign.items.update(done=True)
        Campaign.objects.filter(pk=reprofile.sample_campaign_id).update(status=Campaign.Status.DONE)
        return services.checkpoint_reprofile_continue(reprofile_id=reprofile.pk)


@pytest.mark.django_db
def test_a_sample_that_fits_the_ladder_lets_bands_be_predicted(arithmetic, alice):
    reprofile = ladder_checkpoints(arithmetic, alice, new_order=list(range(48)))
    assert reprofile.model_check["trusted"] and reprofile.model_check["checked"] == 24
    assert reprofile.predicted > 0 and reprofile.predicted + reprofile.probed + 24 == 48


@pytest.mark.django_db
def test_a_checkpoint_that_reorders_the_tasks_is_caught_by_its_sample_and_nothing_is_predicted(arithmetic, alice):
    """An adversarially wrong prior: ckpt-3 finds hard what ckpt-1 and ckpt-2 found easy, and the other way
    round. The sample's tasks, predicted without their own results, are far off: every task is probed."""
    reprofile = ladder_checkpoints(arithmetic, alice, new_order=list(range(48))[::-1])
    check = reprofile.model_check
    assert not check["trusted"] and (check["outliers"] > 0 or check["sum_z2"] > check["critical_sum_z2"])
    assert reprofile.predicted == 0 and reprofile.probed == 48 - 24
    assert not Calibration.objects.filter(probe_model=reprofile.probe_model, predicted_probability__isnull=False)
    assert reprofile.reprofile_campaign.items.count() == 24
