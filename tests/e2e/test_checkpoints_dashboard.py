"""The dashboard for a checkpoint of a run, in a browser: band movement between checkpoints, the pool's
forecast, the operating characteristic with the checkpoint prior, and the re-profile button (all under
the Content-Security-Policy: the conftest fails a test on any violation)."""

from unittest import mock

from calibration.models import Campaign, ProbeModel
from tests.web.test_pages_checkpoints import run  # noqa: F401 (the fixture)


def test_a_checkpoint_shows_its_movement_and_the_prior_and_can_be_reprofiled(
    page,
    live_server,
    sign_in,
    screenshot,
    alice,
    run,  # noqa: F811
):
    third = ProbeModel.objects.get(name="ckpt-3")
    Campaign.objects.create(environment=run, probe_model=third, created_by=alice, seed=2, policy="adaptive")
    sign_in(page, "alice")
    page.goto(f"{live_server.url}/dashboard/?environment=arithmetic&model=ckpt-3")
    card = page.locator("#checkpoint-movement")
    assert "ckpt-2 → ckpt-3: 4 left the band, 2 entered it" in card.inner_text()
    assert "runs out at step 1000" in page.locator("#pool-forecast").inner_text()
    page.wait_for_selector("#operating-characteristic[data-drawn=true]")
    legend = page.locator("#operating-characteristic .legendtext", has_text="with the checkpoint prior")
    assert legend.count() == 2
    assert "ckpt-3 was re-profiled from ckpt-1, ckpt-2" in page.locator("#oc-summary").inner_text()
    screenshot(page, "dashboard-checkpoints")
    ProbeModel.objects.create(
        name="ckpt-4", backend="openai", base_url="http://127.0.0.1:9/v1", run="run-a", checkpoint_step=400
    )
    page.goto(f"{live_server.url}/dashboard/?environment=arithmetic&model=ckpt-4")
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        page.get_by_role("button", name="Re-profile for ckpt-4").click()
        page.wait_for_load_state()
    assert "probes a sample of 10 tasks with ckpt-4" in page.content()
    assert Campaign.objects.filter(probe_model__name="ckpt-4").count() == 1
