"""A campaign keeps a window of jobs in the broker; cancelling drops what is left in milliseconds."""

from unittest import mock

import pytest

from calibration import selectors, services, tasks
from calibration.models import Calibration, Campaign, CampaignItem, Rollout
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db


def word_tasks(count: int) -> list[dict]:
    return [
        {"key": f"t-{i}", "prompt": f"Say 42 ({i}).", "answer": "42", "verifier": {"kind": "exact"}}
        for i in range(count)
    ]


@pytest.fixture
def server_url():
    with serve_openai(respond=lambda prompt, seed: "42" if seed % 2 else "41") as base_url:
        yield base_url


def start(environment, user, model, capture):
    with mock.patch("calibration.tasks.generate_rollouts.delay") as delay, capture(execute=True):
        campaign = services.campaign_start(
            environment=environment, probe_model=model, created_by=user, rollouts=2, round_size=2
        )
    return campaign, delay


def test_a_campaign_queues_its_window_not_every_task(arithmetic, alice, settings, django_capture_on_commit_callbacks):
    settings.PASSBAND_JOBS_PER_CAMPAIGN = 3
    import_tasks(arithmetic, alice, *word_tasks(10))
    model = services.probe_model_add(name="local", backend="transformers")  # one task per job
    campaign, delay = start(arithmetic, alice, model, django_capture_on_commit_callbacks)
    assert delay.call_count == 3
    assert CampaignItem.objects.filter(campaign=campaign, queued_at__isnull=False).count() == 3
    # Filling again while the window is full queues nothing.
    with (
        mock.patch("calibration.tasks.generate_rollouts.delay") as again,
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert services.campaign_enqueue_pending(campaign_id=campaign.pk) == 0
    again.assert_not_called()


def test_a_finished_job_refills_the_window(arithmetic, alice, settings, server_url, django_capture_on_commit_callbacks):
    settings.PASSBAND_JOBS_PER_CAMPAIGN = 2
    settings.PASSBAND_TASKS_PER_JOB = 1
    import_tasks(arithmetic, alice, *word_tasks(5))
    model = services.probe_model_add(name="fake", backend="openai", base_url=server_url, model="fake-model")
    campaign, delay = start(arithmetic, alice, model, django_capture_on_commit_callbacks)
    first_job = delay.call_args_list[0].args
    assert services.round_generate(campaign_id=first_job[0], task_version_ids=first_job[1], round_index=0) == 2
    with (
        mock.patch("calibration.tasks.generate_rollouts.delay") as refill,
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.round_score_and_continue(campaign_id=first_job[0], task_version_ids=first_job[1], round_index=0)
    # The finished item freed one slot: exactly one new task went out.
    assert refill.call_count == 1 and refill.call_args.args[1] != first_job[1]
    assert CampaignItem.objects.filter(campaign=campaign, queued_at__isnull=False, done=False).count() == 2


def test_cancelled_campaign_drops_its_jobs_and_leaves_unprobed_tasks_alone(
    arithmetic, alice, settings, server_url, django_capture_on_commit_callbacks
):
    settings.PASSBAND_TASKS_PER_JOB = 1
    import_tasks(arithmetic, alice, *word_tasks(4))
    model = services.probe_model_add(name="fake", backend="openai", base_url=server_url, model="fake-model")
    campaign, delay = start(arithmetic, alice, model, django_capture_on_commit_callbacks)
    job = delay.call_args_list[0].args
    services.campaign_set_status(campaign=campaign, status=Campaign.Status.CANCELLED)
    with (
        mock.patch("calibration.tasks.verify_rollouts.delay") as verify,
        mock.patch("calibration.tasks.generate_rollouts.delay") as generate,
    ):
        assert tasks.generate_rollouts(*job) == 0
        assert tasks.verify_rollouts(*job) == 0
    verify.assert_not_called()
    generate.assert_not_called()
    assert not Rollout.objects.filter(campaign=campaign).exists()
    # Never probed: no calibration appears (the task list shows it as not probed, not `undecided`).
    assert not Calibration.objects.filter(probe_model=model).exists()
    progress = selectors.campaign_progress(campaign=campaign)
    assert progress["items_to_do"] == 0 and progress["items_dropped"] == 4
    [row] = selectors.campaigns_progress(environment=arithmetic, probe_model=None)
    assert row["items_to_do"] == 0 and row["items_dropped"] == 4


def test_resume_queues_the_window_again(arithmetic, alice, settings, django_capture_on_commit_callbacks):
    settings.PASSBAND_JOBS_PER_CAMPAIGN = 2
    import_tasks(arithmetic, alice, *word_tasks(5))
    model = services.probe_model_add(name="local", backend="transformers")
    campaign, _ = start(arithmetic, alice, model, django_capture_on_commit_callbacks)
    services.campaign_set_status(campaign=campaign, status=Campaign.Status.PAUSED)
    assert services.round_generate(campaign_id=campaign.pk, task_version_ids=[1], round_index=0) is None
    with (
        mock.patch("calibration.tasks.generate_rollouts.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.campaign_set_status(campaign=campaign, status=Campaign.Status.RUNNING)
    assert delay.call_count == 2
