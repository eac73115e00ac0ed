"""Real worker, Redis broker: after a big campaign is cancelled, the next campaign's first rollout
comes within a minute, and the cancelled campaign's never-probed tasks stay as they were.

Prints the measured time from cancel to the next campaign's first rollout (run with -s)."""

import time

import pytest
import redis
from django.conf import settings as django_settings

from calibration import services
from calibration.models import Calibration, Campaign, Rollout
from curation.services import environment_create
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

BIG = 600


def tasks(prefix: str, count: int) -> list[dict]:
    return [
        {"key": f"{prefix}-{i}", "prompt": f"Say 42 ({prefix} {i}).", "answer": "42", "verifier": {"kind": "exact"}}
        for i in range(count)
    ]


def test_cancel_then_next_campaign_makes_progress_within_a_minute(arithmetic, alice, settings, tmp_path):
    flush_broker()
    settings.PASSBAND_TASKS_PER_JOB = 1  # one job per task, as with an in-process model
    second = environment_create(name="second", domain="math", default_verifier={"kind": "exact"})
    import_tasks(arithmetic, alice, *tasks("big", BIG))
    import_tasks(second, alice, *tasks("next", 2))
    worker_env = {"PASSBAND_TASKS_PER_JOB": "1", "PASSBAND_JOBS_PER_CAMPAIGN": str(settings.PASSBAND_JOBS_PER_CAMPAIGN)}
    with (
        serve_openai(latency_s=0.05, record_requests=False) as base_url,
        running_worker(
            queues="default,generate,verify", concurrency=2, extra_env=worker_env, log_path=tmp_path / "worker.log"
        ),
    ):
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=8
        )
        big = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4
        )
        queued = redis.Redis.from_url(django_settings.CELERY_BROKER_URL).llen("generate")
        assert queued <= settings.PASSBAND_JOBS_PER_CAMPAIGN
        wait_for(
            lambda: Rollout.objects.filter(campaign=big).exists(), timeout=120, what="the big campaign's first rollout"
        )
        cancelled_at = time.monotonic()
        services.campaign_set_status(campaign=big, status=Campaign.Status.CANCELLED)
        following = services.campaign_start(
            environment=second, probe_model=model, created_by=alice, rollouts=4, round_size=4
        )
        wait_for(
            lambda: Rollout.objects.filter(campaign=following).exists(),
            timeout=60,
            interval=0.05,
            what="the next campaign's first rollout",
        )
        seconds = time.monotonic() - cancelled_at
        wait_for(
            lambda: Campaign.objects.get(pk=following.pk).status == Campaign.Status.DONE,
            timeout=60,
            what="the next campaign",
        )
    print(
        f"\ncancel -> next campaign's first rollout: {seconds:.2f} s (window {settings.PASSBAND_JOBS_PER_CAMPAIGN} jobs, {BIG} tasks cancelled)"
    )
    probed = set(Rollout.objects.filter(campaign=big).values_list("task_version_id", flat=True))
    assert len(probed) < BIG
    # Tasks the cancelled campaign never reached have no calibration: not `undecided`, just not probed.
    calibrated = set(
        Calibration.objects.filter(probe_model=model, task_version__task__environment=arithmetic).values_list(
            "task_version_id", flat=True
        )
    )
    assert calibrated <= probed
