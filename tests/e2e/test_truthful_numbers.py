"""What a user decides by, in the browser: bands only where the evidence decides them, each campaign's
own results, the promise of the policy the campaigns used, and costs defined once.

Campaigns run inline (the same rounds the workers run) against an OpenAI-compatible server on a socket."""

import re

import pytest

from calibration import services
from calibration.models import Campaign, ProbeModel
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db(transaction=True)


def say_42(count: int, cost: int = 0) -> list[dict]:
    return [
        {
            "key": f"t{i}",
            "prompt": f"Say 42 ({i}).",
            "answer": "42",
            "verifier": {"kind": "exact"},
            "authoring_cost_usd": cost,
        }
        for i in range(count)
    ]


def test_fixed_four_campaigns_decide_nothing_they_cannot_and_show_their_own_results(
    page, live_server, sign_in, screenshot, alice, arithmetic
):
    import_tasks(arithmetic, alice, *say_42(2))
    with serve_openai(respond=lambda prompt, seed: "42") as base_url:
        model = services.probe_model_add(name="fake", backend="openai", base_url=base_url, model="fake-model")
        cancelled = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, enqueue=False
        )
        services.campaign_set_status(campaign=cancelled, status=Campaign.Status.CANCELLED)
        fixed = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, enqueue=False
        )
        services.campaign_run_inline(campaign=fixed)
    sign_in(page, "alice")
    page.goto(f"{live_server.url}/campaigns/{fixed.pk}/")
    bands = page.locator("#campaign-progress .bands").inner_text()
    # Four passes in four: the interval [0.55, 1] straddles the retire zone, so no band is claimed.
    assert "in_band" not in bands and "retire" not in bands and "undecided 2" in bands, bands
    page.goto(f"{live_server.url}/campaigns/{cancelled.pk}/")
    assert page.locator("#campaign-progress .bands").inner_text().strip() == "not probed 2"
    screenshot(page, "cancelled-campaign-own-results")

    page.goto(f"{live_server.url}/dashboard/?environment=arithmetic&model=fake")
    policy = page.locator("#oc-policy").inner_text()
    assert "fixed N = 4 rollouts per task" in policy and f"campaign #{fixed.pk}" in policy
    page.wait_for_selector("#operating-characteristic[data-drawn=true]")
    assert page.locator("#oc-summary").inner_text().startswith("Fixed N = 4 rollouts per task")
    assert page.locator("#operating-characteristic .legendtext", has_text="P(undecided after 4)").count() == 1
    assert page.locator("#operating-characteristic .legendtext", has_text="borderline").count() == 0
    screenshot(page, "dashboard-promise-of-fixed-4")


def test_costs_a_user_sees_come_from_one_definition(page, live_server, sign_in, screenshot, alice, arithmetic):
    """A model priced by the GPU-hour: a first estimate that is not $0 with a time, then per-rollout costs
    that follow each rollout's length, and a per-in-band-task cost over the probed tasks only."""
    import_tasks(arithmetic, alice, *say_42(4, cost=10))
    with serve_openai(latency_s=0.02, eos_probability=0.2) as base_url:
        services.probe_model_add(
            name="gpu", backend="openai", base_url=base_url, model="fake-model", usd_per_gpu_hour=3600
        )
        sign_in(page, "alice")
        page.goto(live_server.url + "/")
        card = page.locator("#environment-arithmetic")
        card.locator("input[name=rollouts]").fill("4")
        card.locator("input[name=max_new_tokens]").fill("16")
        card.locator("button", has_text="Probe").click()
        estimate = page.wait_for_selector("#probe-estimate").inner_text()
        cost = float(re.search(r"Estimated cost: \$([0-9.]+)", estimate).group(1))
        # 16 rollouts of 16 tokens at an assumed 50 tokens per second, $1 per second: $5.12.
        assert cost == pytest.approx(5.12) and "unknown" not in page.inner_text("#estimate-time")
        assert "assumed 50 tokens per second" in estimate
        screenshot(page, "estimate-gpu-hour-no-history")
        campaign = services.campaign_start(  # two of the four tasks: the other two are never probed
            environment=arithmetic,
            probe_model=ProbeModel.objects.get(name="gpu"),
            task_versions=[task.current_version for task in arithmetic.tasks.order_by("key")[:2]],
            created_by=alice,
            rollouts=4,
            round_size=4,
            max_new_tokens=16,
            seed=7,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)

    rollouts = list(campaign.rollouts.all())
    for version_id in {rollout.task_version_id for rollout in rollouts}:  # one batch per task here
        batch = sorted((r for r in rollouts if r.task_version_id == version_id), key=lambda r: r.output_tokens)
        assert batch[0].output_tokens < batch[-1].output_tokens and batch[0].cost_usd < batch[-1].cost_usd
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    shown = float(re.search(r"cost \$([0-9.]+)", page.locator("#campaign-progress").inner_text()).group(1))
    assert shown == pytest.approx(float(sum(rollout.cost_usd for rollout in rollouts)), abs=1e-4)

    page.goto(f"{live_server.url}/models/compare/?environment=arithmetic")
    row = page.locator("#environment-costs tr", has_text="Per in-band task").inner_text()
    assert "authoring of the 2 probed tasks plus all probing" in row, row
    screenshot(page, "models-per-in-band-task")
