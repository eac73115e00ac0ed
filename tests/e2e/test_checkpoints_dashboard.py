"""The dashboard for a checkpoint of a run, in a browser: band movement between checkpoints, the pool's
forecast, the operating characteristic with the checkpoint prior, the re-profile button with its release
picker, and the re-profile's stage (all under the Content-Security-Policy: the conftest fails a test on
any violation)."""

from unittest import mock

from calibration.models import Campaign, ProbeModel, Reprofile
from tests.factories import pinned_release
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
    pinned = [task.current_version for task in run.tasks.order_by("key")[:5]]
    release = pinned_release(alice, third, pinned, environment=run)
    page.goto(f"{live_server.url}/dashboard/?environment=arithmetic&model=ckpt-4")
    assert "No re-profile of arithmetic for ckpt-4 yet." in page.locator("#reprofiles").inner_text()
    page.locator("#reprofile-form select[name=release]").select_option(str(release.pk))
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        page.get_by_role("button", name="Re-profile for ckpt-4").click()
        page.wait_for_load_state()
    assert "probes a sample of 5 tasks with ckpt-4" in page.content()
    campaign = Campaign.objects.get(probe_model__name="ckpt-4")
    assert Reprofile.objects.get().release_id == release.pk
    panel = page.locator("#reprofiles .reprofile")
    assert f"of the tasks release {release.pk} pins (5)" in panel.inner_text()
    assert f"Probing the sample: 5 tasks, campaign {campaign.pk} (0 of 5 done, running)" in panel.inner_text()
    screenshot(page, "dashboard-reprofile")
    panel.get_by_role("link", name=f"campaign {campaign.pk}").click()
    page.wait_for_url(f"**/campaigns/{campaign.pk}/")
