"""What the pages say about a model server: waiting for it, rollouts it gave no ids for, prompts that
do not fit, and a probe model without a price ("no price set", never $0.0000)."""

import pytest
from django.urls import reverse
from django.utils import timezone

from calibration.models import Campaign, Outcome, ProbeModel, Rollout
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def campaign_with(environment, owner, *, price: bool, rollouts: list[dict], **fields) -> Campaign:
    model = ProbeModel.objects.create(
        name="server-model",
        backend="openai",
        server="openai-compatible",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        usd_per_gpu_hour=2 if price else 0,
    )
    import_tasks(environment, owner, {"key": "t", "prompt": "What is 2 + 2?", "answer": "4"})
    task = environment.tasks.get(key="t")
    campaign = Campaign.objects.create(environment=environment, probe_model=model, created_by=owner, seed=1, **fields)
    for index, row in enumerate(rollouts):
        Rollout.objects.create(
            campaign=campaign,
            task_version=task.current_version,
            probe_model=model,
            sample_index=index,
            seed=index,
            **row,
        )
    return campaign


def page(client, user, campaign) -> str:
    client.force_login(user)
    return client.get(reverse("campaign_detail", args=[campaign.pk])).content.decode()


def test_a_campaign_waiting_for_its_server_says_so_with_the_last_error(client, alice, arithmetic):
    campaign = campaign_with(
        arithmetic,
        alice,
        price=True,
        rollouts=[],
        server_waiting_since=timezone.now(),
        server_error="http://gpu-1:8000/v1 failed after 6 tries: ConnectError",
    )
    html = page(client, alice, campaign)
    assert 'id="campaign-server-waiting"' in html and "ConnectError" in html
    Campaign.objects.filter(pk=campaign.pk).update(server_waiting_since=None, server_error="")
    assert 'id="campaign-server-waiting"' not in page(client, alice, campaign)


def test_text_only_rollouts_and_prompts_too_long_are_named_on_the_campaign(client, alice, arithmetic):
    campaign = campaign_with(
        arithmetic,
        alice,
        price=True,
        rollouts=[
            {"text": "4", "outcome": Outcome.PASS, "capture": "text_only"},
            {"text": "4", "outcome": Outcome.PASS, "capture": "exact"},
            {"text": "", "outcome": Outcome.PROMPT_TOO_LONG, "generation_error": "does not fit"},
        ],
    )
    html = page(client, alice, campaign)
    assert 'id="campaign-capture"' in html and "1 rollouts have no token ids" in html
    assert 'id="campaign-prompt-too-long"' in html


def test_a_model_without_a_price_shows_no_price_set_never_zero_dollars(client, alice, arithmetic):
    campaign = campaign_with(arithmetic, alice, price=False, rollouts=[{"text": "4", "outcome": Outcome.PASS}])
    html = page(client, alice, campaign)
    assert 'id="campaign-no-price"' in html and "$0.0000" not in html
    models_page = client.get(reverse("model_compare")).content.decode()
    assert "no price set" in models_page and "openai-compatible" in models_page


def test_a_priced_model_shows_its_cost(client, alice, arithmetic):
    campaign = campaign_with(arithmetic, alice, price=True, rollouts=[{"text": "4", "outcome": Outcome.PASS}])
    html = page(client, alice, campaign)
    assert 'id="campaign-no-price"' not in html and "cost $" in html
    assert "$2.00/GPU-hour" in client.get(reverse("model_compare")).content.decode()


def test_a_campaign_whose_rounds_stalled_says_how_many_were_queued_again(client, alice, arithmetic):
    campaign = campaign_with(arithmetic, alice, price=True, rollouts=[])
    assert 'id="campaign-stalls"' not in page(client, alice, campaign)
    Campaign.objects.filter(pk=campaign.pk).update(stalled_rounds=3, last_stall_at=timezone.now())
    html = page(client, alice, campaign)
    assert "3 task rounds stalled and were queued again" in html and "Nothing was lost or counted twice." in html
    assert "the worker holding them stopped renewing its lease (it died or was stopped)" in html
    # Still said once the campaign is done (no rate shown then).
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.DONE)
    assert "3 task rounds stalled and were queued again" in page(client, alice, campaign)
