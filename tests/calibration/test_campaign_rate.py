"""The campaign's rate and time left come from what was stored, and say unknown rather than guess."""

from datetime import timedelta

import pytest
from django.utils import timezone

from calibration import selectors, services
from calibration.models import Rollout
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db


def _campaign(arithmetic, alice, base_url, tasks: int):
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t{i}", "prompt": f"What is {i} + 42?", "answer": str(i + 42), "verifier": {"kind": "exact"}}
            for i in range(tasks)
        ],
    )
    model = services.probe_model_add(name="fake", backend="openai", base_url=base_url, model="fake-model")
    return services.campaign_start(
        environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, enqueue=False
    )


def _store(campaign, version_id: int, round_index: int, *, minutes_ago: float):
    services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=[version_id], round_index=round_index)
    Rollout.objects.filter(campaign=campaign, task_version_id=version_id).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )


def test_one_store_is_unknown_two_stores_give_the_measured_rate(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=10)
        versions = list(campaign.items.order_by("task_version_id").values_list("task_version_id", flat=True))
        progress = selectors.campaign_progress(campaign=campaign)
        assert progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None
        # One job's rollouts share one instant: a burst of 4 says nothing about speed (it was "480 per minute").
        _store(campaign, versions[0], 0, minutes_ago=4)
        progress = selectors.campaign_progress(campaign=campaign)
        assert progress["stored"] == 4 and progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None
        # A second store two minutes later: 4 rollouts after the first store, over the 4 minutes since it.
        _store(campaign, versions[1], 0, minutes_ago=2)
        progress = selectors.campaign_progress(campaign=campaign)
    assert progress["rollouts_per_minute"] == pytest.approx(1.0, rel=0.02)
    # 10 open tasks × 4 rollouts, 8 stored: 32 left at one a minute.
    assert progress["eta_seconds"] == pytest.approx(32 * 60, rel=0.02)


def test_stores_older_than_the_window_are_unknown_not_zero(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=3)
        versions = list(campaign.items.order_by("task_version_id").values_list("task_version_id", flat=True))
        _store(campaign, versions[0], 0, minutes_ago=30)
        _store(campaign, versions[1], 0, minutes_ago=25)
        progress = selectors.campaign_progress(campaign=campaign)
    assert progress["stored"] == 8
    assert progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None
