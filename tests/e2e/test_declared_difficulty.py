"""The dashboard of an environment whose tasks declare a difficulty, in a browser: the operating
characteristic's summary says the declared difficulty picks each task's table (under the
Content-Security-Policy: the conftest fails a test on any violation)."""

from django.core.cache import cache

from calibration.models import Campaign
from tests.calibration.test_learned_policy import environment_with_declared_difficulty  # noqa: F401 (the fixture)


def test_the_dashboard_says_the_declared_difficulty_picks_the_tables(
    page,
    live_server,
    sign_in,
    screenshot,
    alice,
    settings,
    environment_with_declared_difficulty,  # noqa: F811
):
    probes, model = environment_with_declared_difficulty
    environment = probes["undeclared"].environment
    Campaign.objects.create(
        environment=environment, probe_model=model, created_by=alice, seed=3, policy="adaptive", max_rollouts=256
    )
    settings.PASSBAND_LEARNED_MIN_TASKS = 50
    cache.clear()
    sign_in(page, "alice")
    page.goto(f"{live_server.url}/dashboard/?environment={environment.name}&model={model.name}")
    # The card's data is the tables learned on this request (the cache was cleared): seconds on an idle machine,
    # many more on a busy one, so the wait is the learning's and not the page's.
    page.wait_for_selector("#operating-characteristic[data-drawn=true]", timeout=120_000)
    summary = page.locator("#oc-summary").inner_text()
    assert "Tasks that declare a difficulty follow one of 2 tables learned per stratum of it under probe" in summary
    assert "(split at 2)" in summary
    screenshot(page, "dashboard-declared-difficulty")
