"""Campaign pause, resume and cancel, and costs summed from rollout rows."""

import time
from decimal import Decimal

import pytest

from calibration import selectors, services
from calibration.errors import CalibrationError
from calibration.models import Campaign, Rollout
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_server():
    with serve_openai(respond=lambda prompt, seed: "42" if seed % 2 else "41") as base_url:
        yield base_url


def start(environment, user, base_url, **kwargs):
    model = services.probe_model_add(
        name="fake",
        backend="openai",
        base_url=base_url,
        model="fake-model",
        usd_per_million_input_tokens=1000,
        usd_per_million_output_tokens=2000,
    )
    return services.campaign_start(environment=environment, probe_model=model, created_by=user, enqueue=False, **kwargs)


def test_paused_campaign_generates_nothing_until_resumed(arithmetic, alice, fake_server):
    import_tasks(arithmetic, alice, {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "exact"}})
    campaign = start(arithmetic, alice, fake_server, rollouts=4, round_size=4, seed=2)
    services.campaign_set_status(campaign=campaign, status=Campaign.Status.PAUSED)
    version = campaign.items.get().task_version
    assert services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=[version.pk], round_index=0) == 0
    services.campaign_set_status(campaign=campaign, status=Campaign.Status.RUNNING)
    services.campaign_run_inline(campaign=campaign)
    assert campaign.status == Campaign.Status.DONE and campaign.rollouts.count() == 4
    with pytest.raises(CalibrationError):
        services.campaign_set_status(campaign=campaign, status=Campaign.Status.PAUSED)


def test_cancelled_campaign_stops(arithmetic, alice, fake_server):
    import_tasks(arithmetic, alice, {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "exact"}})
    campaign = start(arithmetic, alice, fake_server, rollouts=4, round_size=4, seed=2)
    services.campaign_set_status(campaign=campaign, status=Campaign.Status.CANCELLED)
    services.campaign_run_inline(campaign=campaign)
    assert campaign.rollouts.count() == 0 and campaign.status == Campaign.Status.CANCELLED


def test_rollout_cost_comes_from_token_prices_and_sums_once(arithmetic, alice, fake_server):
    import_tasks(
        arithmetic,
        alice,
        {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "exact"}},
        {"key": "b", "prompt": "Say 42 again", "answer": "42", "verifier": {"kind": "exact"}},
    )
    campaign = start(arithmetic, alice, fake_server, rollouts=4, round_size=2, seed=3)
    services.campaign_run_inline(campaign=campaign)
    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == 8
    for rollout in rollouts:
        expected = (Decimal(rollout.input_tokens) * 1000 + Decimal(rollout.output_tokens) * 2000) / Decimal(1_000_000)
        assert rollout.cost_usd == expected.quantize(Decimal("0.00000001")) and rollout.cost_usd > 0
    total = sum(rollout.cost_usd for rollout in rollouts)
    assert Decimal(str(selectors.campaign_progress(campaign=campaign)["cost"])).quantize(
        Decimal("0.0001")
    ) == total.quantize(Decimal("0.0001"))
    per_task = {
        c.task_version.task.key: c.cost_usd
        for c in campaign.probe_model.calibrations.select_related("task_version__task")
    }
    assert sum(per_task.values()) == total.quantize(Decimal("0.000001"))
    # Half the samples answer 42: both tasks see passes and fails, counted as attempts.
    assert all(c.attempts == 4 for c in campaign.probe_model.calibrations.all())


def test_gpu_hour_price_charges_each_round_once_shared_by_its_rollouts(arithmetic, alice):
    import_tasks(arithmetic, alice, {"key": "a", "prompt": "Say 42", "answer": "42", "verifier": {"kind": "exact"}})
    with serve_openai(latency_s=0.05) as base_url:
        model = services.probe_model_add(
            name="gpu", backend="openai", base_url=base_url, model="fake-model", usd_per_gpu_hour=3600, gpus=2
        )
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, seed=1, enqueue=False
        )
        started = time.perf_counter()
        services.campaign_run_inline(campaign=campaign)
        whole_run_seconds = time.perf_counter() - started
    rollouts = list(campaign.rollouts.all())
    costs = [rollout.cost_usd for rollout in rollouts]
    # $3,600 per GPU-hour × 2 GPUs is $2 per second of the round's wall time, shared by its four
    # concurrent rollouts by the tokens each generated: together they cost no more than the whole
    # run took, not four times it, and a longer answer costs more.
    assert len(costs) == 4 and all(cost > 0 for cost in costs)
    assert sum(costs) <= Decimal(2 * whole_run_seconds) + Decimal("0.0001")
    by_length = sorted(rollouts, key=lambda rollout: rollout.output_tokens)
    assert by_length[0].output_tokens < by_length[-1].output_tokens and by_length[0].cost_usd < by_length[-1].cost_usd


def test_each_campaign_page_shows_the_bands_of_its_own_rollouts(client, arithmetic, alice, fake_server):
    """Campaign #1 is cancelled before any rollout; #2 probes the same tasks with the same model."""
    import_tasks(
        arithmetic,
        alice,
        *[{"key": f"t{i}", "prompt": f"Say 42 ({i})", "answer": "42", "verifier": {"kind": "exact"}} for i in range(2)],
    )
    cancelled = start(arithmetic, alice, fake_server, rollouts=4, round_size=4, seed=1)
    services.campaign_set_status(campaign=cancelled, status=Campaign.Status.CANCELLED)
    second = services.campaign_start(
        environment=arithmetic,
        probe_model=cancelled.probe_model,
        created_by=alice,
        rollouts=8,
        round_size=8,
        seed=2,
        enqueue=False,
    )
    services.campaign_run_inline(campaign=second)
    assert selectors.campaign_band_table(campaign=cancelled) == [("not probed", 2)]
    own = dict(selectors.campaign_band_table(campaign=second))
    assert sum(own.values()) == 2 and "not probed" not in own
    client.force_login(alice)
    page = client.get(f"/campaigns/{cancelled.pk}/").content.decode()
    assert "not probed 2" in page and "in_band" not in page and "undecided" not in page
