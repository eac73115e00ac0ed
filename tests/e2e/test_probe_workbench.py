"""Probe a random sample with an estimate first, and see the truncation warning then raise the budget."""

import pytest

from calibration import services
from calibration.models import Campaign
from curation.services import environment_update
from tests.factories import import_tasks, math_task
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker

pytestmark = pytest.mark.django_db(transaction=True)


def many(count: int) -> list[dict]:
    return [math_task(f"t-{i:02d}", question=f"What is {i} + 3?", answer=str(i + 3)) for i in range(count)]


def test_probe_a_random_sample_after_seeing_the_estimate(page, live_server, sign_in, screenshot, alice, arithmetic):
    flush_broker()
    import_tasks(arithmetic, alice, *many(20))
    services.probe_model_add(
        name="fake", backend="openai", base_url="http://127.0.0.1:9/v1", model="m", usd_per_million_output_tokens=10
    )
    sign_in(page, "alice")
    page.goto(live_server.url + "/")
    card = page.locator("#environment-arithmetic")
    card.locator("select[name=scope]").select_option("sample")
    card.locator("input[name=sample_size]").fill("5")
    card.locator("button", has_text="Probe").click()
    estimate = page.wait_for_selector("#probe-estimate").inner_text()
    assert "5 tasks" in estimate and "a random sample" in estimate and "Estimated cost: $" in estimate
    screenshot(page, "probe-estimate")
    page.click("#probe-start")
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.items.count() == 5
    # A second Probe of the same environment and model asks before starting a duplicate.
    page.goto(live_server.url + "/")
    page.locator("#environment-arithmetic button", has_text="Probe").click()
    assert f"campaign #{campaign.pk}" in page.wait_for_selector("#probe-duplicate").inner_text()
    assert page.inner_text("#probe-start") == "Start another campaign anyway"
    flush_broker()


def test_truncation_warning_then_probe_with_a_bigger_budget(page, live_server, sign_in, screenshot, alice, arithmetic):
    flush_broker()
    import_tasks(arithmetic, alice, math_task("sum"))
    environment_update(environment=arithmetic, max_new_tokens=8)
    with serve_openai(respond=lambda prompt, seed: "The answer is 5.") as base_url:
        model = services.probe_model_add(name="fake", backend="openai", base_url=base_url, model="m")
        campaign = services.campaign_start(environment=arithmetic, probe_model=model, created_by=alice, enqueue=False)
        services.campaign_run_inline(campaign=campaign)
    sign_in(page, "alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    warning = page.wait_for_selector("#campaign-truncation.warning").inner_text()
    assert "100.0% of rollouts (8) stopped at the 8-token limit" in warning and "more max new tokens" in warning
    screenshot(page, "truncation-warning")
    page.goto(live_server.url + "/")
    card = page.locator("#environment-arithmetic")
    assert card.locator("input[name=max_new_tokens]").input_value() == "8"  # the environment's default
    card.locator("input[name=max_new_tokens]").fill("64")
    card.locator("button", has_text="Probe").click()
    assert "at most 64 new tokens" in page.wait_for_selector("#probe-estimate").inner_text()
    page.click("#probe-start")
    page.wait_for_url("**/campaigns/*/")
    assert Campaign.objects.latest("created_at").max_new_tokens == 64
    flush_broker()
