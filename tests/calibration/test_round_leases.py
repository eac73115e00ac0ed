"""What beat calls stalled (calibration/services/leases.py): a lease that ran out, or a message lost while no
worker was at work; never a round that waits behind others or generates slowly; each round once."""

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from calibration import services
from calibration.models import Campaign, CampaignItem
from tests.calibration.test_batched_rounds import openai_model, word_tasks
from tests.factories import import_tasks


@pytest.fixture
def campaign(arithmetic, alice, settings):
    settings.PASSBAND_STALLED_AFTER = 60
    import_tasks(arithmetic, alice, *word_tasks(3))
    return services.campaign_start(
        environment=arithmetic, probe_model=openai_model("http://127.0.0.1:9/v1"), created_by=alice, enqueue=False
    )


def reconcile() -> list[tuple]:
    with mock.patch("calibration.tasks.generate_rollouts.delay") as delay:
        services.campaigns_reconcile()
    return [call.args for call in delay.call_args_list]


def items(campaign) -> list[CampaignItem]:
    return list(CampaignItem.objects.filter(campaign=campaign).order_by("task_version_id"))


@pytest.mark.django_db
def test_rounds_queued_long_ago_wait_while_any_worker_holds_a_live_lease(campaign):
    first, second, third = items(campaign)
    long_ago = timezone.now() - timedelta(hours=1)
    CampaignItem.objects.filter(campaign=campaign).update(queued_at=long_ago)
    # A worker is ten minutes into a generation: its lease is renewed, the others wait behind it.
    services.round_lease_renew(campaign_id=campaign.pk, task_version_ids=[first.task_version_id], round_index=0)
    assert reconcile() == []
    # The generation ends: the lease is given back; the round waits for its verify job, queued now.
    services.round_lease_release(campaign_id=campaign.pk, task_version_ids=[first.task_version_id], round_index=0)
    assert reconcile() == []
    # Nothing anywhere at work for the stall time: every round still queued lost its message.
    CampaignItem.objects.filter(pk=first.pk).update(queued_at=long_ago)
    ids = [first.task_version_id, second.task_version_id, third.task_version_id]
    assert reconcile() == [(campaign.pk, ids, 0)]
    campaign.refresh_from_db()
    assert campaign.stalled_rounds == 3


@pytest.mark.django_db
def test_a_lost_message_is_queued_again_once_when_nothing_is_at_work(campaign):
    first, second, third = items(campaign)
    CampaignItem.objects.filter(campaign=campaign).update(queued_at=timezone.now() - timedelta(hours=1))
    CampaignItem.objects.filter(pk=third.pk).update(done=True)
    assert reconcile() == [(campaign.pk, [first.task_version_id, second.task_version_id], 0)]
    assert reconcile() == []  # once: queued again just now
    campaign.refresh_from_db()
    assert campaign.stalled_rounds == 2


@pytest.mark.django_db
def test_a_lease_that_ran_out_is_queued_again_once(campaign):
    first, second, third = items(campaign)
    CampaignItem.objects.filter(campaign=campaign).update(queued_at=timezone.now())
    services.round_lease_renew(campaign_id=campaign.pk, task_version_ids=[second.task_version_id], round_index=0)
    # The worker was killed: nobody renews; the lease runs out.
    CampaignItem.objects.filter(pk=second.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert reconcile() == [(campaign.pk, [second.task_version_id], 0)]
    assert reconcile() == []
    campaign.refresh_from_db()
    assert campaign.stalled_rounds == 1 and campaign.status == Campaign.Status.RUNNING


@pytest.mark.django_db
def test_the_heartbeat_keeps_a_lease_alive_past_its_length(campaign, settings):
    settings.PASSBAND_ROUND_LEASE_S = 0.6
    first, _, _ = items(campaign)
    CampaignItem.objects.filter(campaign=campaign).update(queued_at=timezone.now())
    with mock.patch("calibration.services.leases.round_lease_renew", wraps=services.round_lease_renew) as renew:
        with services.round_leased(campaign_id=campaign.pk, task_version_ids=[first.task_version_id], round_index=0):
            held = CampaignItem.objects.get(pk=first.pk).lease_expires_at
            assert held is not None and held > timezone.now()
            deadline = timezone.now() + timedelta(seconds=30)
            while renew.call_count < 3 and timezone.now() < deadline:  # the heartbeat renews while the job runs
                pass
    assert renew.call_count >= 3
    released = CampaignItem.objects.get(pk=first.pk)
    assert released.lease_expires_at is None and released.queued_at is not None
