"""Cancel a big campaign in the browser, resume another: the resumed one makes progress within a minute.

Real worker (Redis broker, the test database) and an OpenAI-compatible server on a socket."""

import time

import pytest

from calibration import services
from calibration.models import Campaign, Rollout
from curation.services import environment_create
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def tasks(prefix: str, count: int) -> list[dict]:
    return [
        {"key": f"{prefix}-{i}", "prompt": f"Say 42 ({prefix} {i}).", "answer": "42", "verifier": {"kind": "exact"}}
        for i in range(count)
    ]


def test_cancel_then_resume_makes_progress_within_a_minute(
    page, live_server, sign_in, screenshot, alice, arithmetic, settings
):
    flush_broker()
    settings.PASSBAND_TASKS_PER_JOB = 1
    second = environment_create(name="second", domain="math", default_verifier={"kind": "exact"})
    import_tasks(arithmetic, alice, *tasks("big", 400))
    import_tasks(second, alice, *tasks("next", 3))
    page.on("dialog", lambda dialog: dialog.accept())
    with (
        serve_openai(latency_s=0.05, record_requests=False) as base_url,
        running_worker(queues="default,generate,verify", concurrency=2, extra_env={"PASSBAND_TASKS_PER_JOB": "1"}),
    ):
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=8
        )
        waiting = services.campaign_start(
            environment=second, probe_model=model, created_by=alice, rollouts=4, round_size=4
        )
        services.campaign_set_status(campaign=waiting, status=Campaign.Status.PAUSED)
        big = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4
        )
        wait_for(
            lambda: Rollout.objects.filter(campaign=big).exists(), timeout=120, what="the big campaign's first rollout"
        )

        sign_in(page, "alice")
        page.goto(f"{live_server.url}/campaigns/{big.pk}/")
        assert page.locator("#campaign-actions button", has_text="Resume").is_disabled()
        page.locator("#campaign-actions button", has_text="Cancel").click()
        page.wait_for_selector("#campaign-progress [data-status=cancelled]")
        cancelled_at = time.monotonic()
        assert page.locator("#campaign-actions button", has_text="Cancel").is_disabled()

        page.goto(f"{live_server.url}/campaigns/{waiting.pk}/")
        page.locator("#campaign-actions button", has_text="Resume").click()
        wait_for(
            lambda: Rollout.objects.filter(campaign=waiting).exists(),
            timeout=60,
            interval=0.1,
            what="the resumed campaign's first rollout",
        )
        print(f"\ncancel -> resumed campaign's first rollout: {time.monotonic() - cancelled_at:.2f} s (browser)")
        page.wait_for_selector("#campaign-progress [data-status=done]", timeout=60_000)
        screenshot(page, "campaign-resumed-after-cancel")

    page.goto(f"{live_server.url}/campaigns/{big.pk}/")
    assert "never finished (cancelled" in page.locator("#campaign-dropped").inner_text()
