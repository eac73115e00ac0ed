"""A reviewer works the queue with the keyboard: approves one task, rejects another with a comment."""

import pytest
from django.utils import timezone

from calibration.models import (
    Band,
    Calibration,
    Campaign,
    CampaignItem,
    ProbeModel,
    Rollout,
)
from curation.models import TaskStatus
from curation.services import task_transition
from review.models import Review
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue(alice, arithmetic):
    import_tasks(
        arithmetic,
        alice,
        math_task("easy-sum", question="What is $2 + 3$?", answer="5"),
        math_task("hard-sum", question="What is $\\sum_{k=1}^{100} k$?", answer="5050"),
    )
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    campaign = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)
    for task, band, passes in [
        (arithmetic.tasks.get(key="easy-sum"), Band.RETIRE, 8),
        (arithmetic.tasks.get(key="hard-sum"), Band.IN_BAND, 3),
    ]:
        CampaignItem.objects.create(campaign=campaign, task_version=task.current_version, done=True)
        Calibration.objects.create(
            task_version=task.current_version,
            probe_model=model,
            band=band,
            attempts=8,
            successes=passes,
            pass_rate=passes / 8,
            interval_low=max(passes / 8 - 0.3, 0),
            interval_high=min(passes / 8 + 0.2, 1),
            cost_usd="0.01",
        )
        for index in range(8):
            Rollout.objects.create(
                campaign=campaign,
                task_version=task.current_version,
                probe_model=model,
                sample_index=index,
                seed=index,
                text=f"Attempt {index}",
                outcome="pass" if index < passes else "fail",
                verify_ms=2.0 + index,
                verified_at=timezone.now(),
            )
        task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    return arithmetic


def test_reviewer_approves_and_rejects_with_the_keyboard(page, live_server, sign_in, screenshot, bob, queue):
    sign_in(page, "bob")
    page.goto(live_server.url + "/review/")
    # Too easy (retire) is flagged, so it comes first.
    page.wait_for_selector("#review-task[data-key=easy-sum]")
    page.keyboard.press("?")
    assert page.locator("#review-help").is_visible()
    page.keyboard.press("Escape")
    screenshot(page, "review-queue")

    page.keyboard.press("j")  # next task, then back
    page.wait_for_selector("#review-task[data-key=hard-sum]")
    page.keyboard.press("k")
    page.wait_for_selector("#review-task[data-key=easy-sum]")

    page.keyboard.press("r")  # reject needs a comment: an empty one is not sent
    assert page.locator("#reject-comment").is_visible()
    page.keyboard.press("Control+Enter")
    assert page.locator("#reject-form").is_visible()
    page.fill("#reject-comment", "Too easy: every attempt passes.")
    page.select_option("#reject-defect", "other")  # a reject names its defect (docs/review.md)
    page.focus("#reject-comment")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#review-task[data-key=hard-sum]")
    assert "was rejected" in page.content()

    page.keyboard.press("a")
    page.wait_for_selector("#review-empty")
    assert "was approved" in page.content()
    assert "<td>bob</td>" in page.content()  # reviewer progress

    statuses = dict(queue.tasks.values_list("key", "status"))
    assert statuses == {"easy-sum": TaskStatus.REJECTED, "hard-sum": TaskStatus.APPROVED}
    assert Review.objects.get(task__key="easy-sum").comment == "Too easy: every attempt passes."


def test_dashboard_draws_every_chart(page, live_server, sign_in, screenshot, bob, queue):
    sign_in(page, "bob")
    page.goto(live_server.url + "/dashboard/?environment=arithmetic&model=probe")
    for element in (
        "pass-rate-histogram",
        "bands-over-time",
        "cost-per-task",
        "spend-by-band",
        "verifier-latency",
        "campaign-progress",
        "operating-characteristic",
    ):
        page.wait_for_selector(f"#{element}[data-drawn=true]")
    assert "2 calibrated tasks, 1 in band" in page.inner_text("#histogram-summary")
    assert "wrong at most" in page.inner_text("#oc-summary")
    screenshot(page, "dashboard")
