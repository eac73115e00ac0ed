"""Cancel through real workers: after it, every rollout stored is scored or discarded (and not billed),
the round that was sampling when the cancel came stores nothing, and the campaign page, the trajectory
viewer, the dashboard's header and spend card, cost.json and the API give the same counts and cost.

The model server holds two tasks' requests until the test lets them go, so the order is fixed: one
task scored in full, one task stored while no verifier runs, one task still sampling at the cancel."""

import re
import threading

import pytest

from accounts.services import api_token_create
from calibration import services
from calibration.models import Campaign, CampaignItem, Outcome, Rollout
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker, running_worker, start_worker, stop_worker, wait_for

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]


def _generate_jobs_finished(log_path) -> int:
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    return len(re.findall(r"generate_rollouts\[[^\]]+\] succeeded", text))


def test_after_cancel_every_page_and_the_api_agree(client, alice, arithmetic, settings, tmp_path):
    flush_broker()
    settings.PASSBAND_TASKS_PER_JOB = 1
    settings.PASSBAND_JOBS_PER_CAMPAIGN = 3
    gates = {"held-1": threading.Event(), "held-2": threading.Event()}

    def respond(prompt: str, seed: int) -> str:
        for key, gate in gates.items():
            if key in prompt:
                gate.wait(120)
        return "42"

    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": key, "prompt": f"Say 42 ({key}).", "answer": "42", "verifier": {"kind": "exact"}}
            for key in ("fast-0", "held-1", "held-2")
        ],
    )
    worker_env = {"PASSBAND_TASKS_PER_JOB": "1", "PASSBAND_JOBS_PER_CAMPAIGN": "3"}
    generate_log = tmp_path / "generate.log"
    with (
        serve_openai(respond=respond, record_requests=False) as base_url,
        running_worker(
            queues="default,generate", concurrency=3, name="gen", extra_env=worker_env, log_path=generate_log
        ),
    ):
        verifier = start_worker(queues="verify", concurrency=1, name="verify", extra_env=worker_env)
        try:
            model = services.probe_model_add(
                name="priced", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=8,
                usd_per_million_output_tokens=5000, usd_per_million_input_tokens=1000,
            )  # fmt: skip
            campaign = services.campaign_start(
                environment=arithmetic, probe_model=model, created_by=alice, rollouts=8, round_size=4
            )
            fast = CampaignItem.objects.get(campaign=campaign, task_version__task__key="fast-0")
            wait_for(lambda: CampaignItem.objects.get(pk=fast.pk).done, timeout=120, what="fast-0 scored in full")
        finally:
            stop_worker(verifier)
        gates["held-1"].set()  # stored with no verifier running: it waits for one
        wait_for(
            lambda: Rollout.objects.filter(campaign=campaign, task_version__task__key="held-1").count() == 4,
            timeout=120,
            what="held-1's first round stored",
        )
        services.campaign_set_status(campaign=campaign, status=Campaign.Status.CANCELLED)
        gates["held-2"].set()  # its round was sampling when the cancel came
        # fast-0's two rounds, held-1's and held-2's: four generate jobs, the last one after the cancel.
        wait_for(lambda: _generate_jobs_finished(generate_log) >= 4, timeout=120, what="held-2's job to finish")

    rollouts = Rollout.objects.filter(campaign=campaign)
    assert not rollouts.filter(task_version__task__key="held-2").exists()
    assert not rollouts.filter(outcome__isnull=True).exists()
    held = rollouts.filter(task_version__task__key="held-1")
    assert {(r.outcome, r.cost_usd) for r in held} == {(Outcome.DISCARDED, 0)}
    scored = rollouts.filter(task_version__task__key="fast-0")
    assert scored.count() == 8 and set(scored.values_list("outcome", flat=True)) == {Outcome.PASS}
    cost = float(sum(r.cost_usd for r in scored))
    assert cost > 0

    # The API.
    secret = api_token_create(user=alice, name="t", scopes=["read"])[1]
    api = client.get(f"/api/v1/campaigns/{campaign.pk}", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert (api["stored"], api["passed"], api["discarded"], api["unverified"]) == (12, 8, 4, 0)
    assert api["cost_usd"] == pytest.approx(cost)
    assert api["rollouts_per_minute"] is None and api["eta_seconds"] is None  # cancelled: nothing to measure

    client.force_login(alice)
    # The campaign page.
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "12 rollouts: 8 pass" in page and "0 waiting for the verifier" in page
    assert "4 discarded" in page and f"cost ${cost:.4f}" in page
    # The trajectory viewer, on the campaign's link.
    viewer = client.get(f"/rollouts/?campaign={campaign.pk}").content.decode()
    assert re.search(r'id="rollouts-total">12<', viewer)
    assert (
        "pass (8)" in viewer
        and "discarded (4)" in viewer
        and "unverified" not in viewer.split("outcome-filter")[1][:600]
    )
    # The dashboard's header and its spend card, and cost.json.
    header = client.get(f"/dashboard/pass-rates.json?environment={arithmetic.name}&model=priced").json()
    spend = client.get(f"/dashboard/cost.json?environment={arithmetic.name}").json()
    assert header["cost_usd"] == pytest.approx(cost)
    assert sum(row["probing_usd"] for row in spend["environments"]) == pytest.approx(cost)
    assert all(row["probing_usd"] == 0 for row in spend["bands"] if row["band"] == "unprobed")
