"""Real worker processes: kill -9 one in the middle of a campaign; every rollout is recorded once."""

import time

import pytest
from django.db.models import Count

from calibration import services
from calibration.models import Calibration, Campaign, Rollout
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker, start_worker, stop_worker, wait_for

pytestmark = [pytest.mark.workers]

TASKS, ROLLOUTS, ROUND = 24, 8, 4


def wait_until_done(campaign, *, worker, timeout: float, what: str) -> None:
    """Wait for the campaign to finish, then stop the worker (whatever happened)."""
    try:
        wait_for(
            lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=timeout, what=what
        )
    finally:
        stop_worker(worker)


@pytest.mark.django_db(transaction=True)
def test_kill_minus_nine_mid_campaign_loses_and_duplicates_nothing(arithmetic, alice, tmp_path, settings):
    flush_broker()
    # Small batches, so several jobs are in flight when the worker dies.
    settings.PASSBAND_TASKS_PER_JOB = 3
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t-{i}", "prompt": f"Say the answer number {i}.", "answer": "42", "verifier": {"kind": "exact"}}
            for i in range(TASKS)
        ],
    )
    # Redis hands an unacknowledged message to another worker after the visibility timeout.
    fast_redelivery = {"PASSBAND_VISIBILITY_TIMEOUT": "4", "PASSBAND_TASKS_PER_JOB": "3"}
    with serve_openai(latency_s=0.05, record_requests=False) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=16
        )
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=ROLLOUTS, round_size=ROUND, seed=1
        )
        first = start_worker(concurrency=2, name="first", extra_env=fast_redelivery, log_path=tmp_path / "first.log")
        stored_before_kill = wait_for(
            lambda: (n := Rollout.objects.filter(campaign=campaign).count()) >= TASKS * ROLLOUTS // 4 and n,
            timeout=120,
            interval=0.05,
            what="the first worker to store a quarter of the rollouts",
        )
        stop_worker(first, hard=True)  # SIGKILL to the whole process group: no goodbye, no acks
        assert Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.RUNNING
        time.sleep(1)
        # Redis redelivers what the dead worker had taken; a message it was handed at the instant of
        # the kill is gone, and beat's reconcile re-queues that round from the database.
        recovery = {**fast_redelivery, "PASSBAND_RECONCILE_EVERY": "2", "PASSBAND_STALLED_AFTER": "6"}
        second = start_worker(
            concurrency=2,
            name="second",
            extra_env=recovery,
            log_path=tmp_path / "second.log",
            beat_schedule=tmp_path / "beat-schedule",
        )
        wait_until_done(campaign, worker=second, timeout=240, what="the second worker to finish the campaign")

    assert stored_before_kill < TASKS * ROLLOUTS
    per_task = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert len(per_task) == TASKS
    assert all(row["n"] == ROLLOUTS and row["distinct"] == ROLLOUTS for row in per_task)
    assert not Rollout.objects.filter(campaign=campaign, outcome__isnull=True).exists()
    calibrations = Calibration.objects.filter(probe_model=model)
    assert calibrations.count() == TASKS
    assert sum(c.attempts + c.verifier_errors + c.generation_errors for c in calibrations) == TASKS * ROLLOUTS


@pytest.mark.django_db(transaction=True)
def test_rounds_whose_messages_were_lost_are_queued_again_by_beat(arithmetic, alice, tmp_path):
    flush_broker()
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t-{i}", "prompt": f"Say it ({i}).", "answer": "42", "verifier": {"kind": "exact"}}
            for i in range(6)
        ],
    )
    with serve_openai(record_requests=False) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=16
        )
        # Not queued at all: as if every message of the campaign had been lost.
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=2, seed=1, enqueue=False
        )
        recovery = {"PASSBAND_RECONCILE_EVERY": "1", "PASSBAND_STALLED_AFTER": "0"}
        worker = start_worker(
            name="beat", extra_env=recovery, log_path=tmp_path / "worker.log", beat_schedule=tmp_path / "beat-schedule"
        )
        wait_until_done(campaign, worker=worker, timeout=120, what="beat's reconcile to drive the campaign to the end")
    per_task = Rollout.objects.filter(campaign=campaign).values("task_version").annotate(n=Count("id"))
    assert sorted(row["n"] for row in per_task) == [4] * 6
    assert not Rollout.objects.filter(campaign=campaign, outcome__isnull=True).exists()
