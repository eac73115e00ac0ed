"""In real browsers: a reviewer fixes a task in the queue (a new version, audited again), starts the
re-probe the queue offers, then approves it; a trainer compares two releases on the diff page. Every page
under the strict CSP."""

import pytest

from calibration.models import CampaignItem, ProbeModel
from curation.models import TaskStatus
from review.models import Review
from tests.review.test_review import submitted
from tests.web.test_history import two_releases  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_fix_reprobe_and_accept_in_the_queue(page, live_server, sign_in, alice, bob, arithmetic):
    submitted(arithmetic, alice, "t-1")
    ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    sign_in(page, "bob")
    page.goto(live_server.url + "/review/")
    page.click("button[data-open=fix-form]")
    page.fill("#fix-prompt", "What is 2 + 2?")
    page.fill("#fix-answer", "4")
    page.select_option("#fix-defect", "wrong_answer")
    page.click("#fix-form button[type=submit]")
    page.wait_for_selector("text=is now version 2 (its audit passed)")
    assert "v2 is not probed yet" in page.locator("#reprobe-form").inner_text()
    page.click("#reprobe-form button[type=submit]")
    page.wait_for_selector("text=Re-probing t-1 v2")
    assert list(CampaignItem.objects.values_list("task_version__number", flat=True)) == [2]
    page.goto(live_server.url + "/review/")
    page.on("dialog", lambda dialog: dialog.accept())  # approving an unprobed band asks first
    page.click("#approve-button")
    page.wait_for_selector("text=was approved")
    task = arithmetic.tasks.get(key="t-1")
    assert task.status == TaskStatus.APPROVED and task.current_version.number == 2
    assert sorted(Review.objects.values_list("decision", "defect")) == [("approve", ""), ("fix", "wrong_answer")]


def test_a_trainer_compares_two_releases(page, live_server, sign_in, charlie, two_releases):  # noqa: F811
    old, new = two_releases
    sign_in(page, "charlie")
    page.goto(live_server.url + "/releases/")
    form = page.locator(f"#release-{new.pk} .release-diff-form")
    form.locator("input[name=against]").fill(str(old.pk))
    form.locator("button").click()
    page.wait_for_selector("#diff-summary")
    assert "1 added · 1 removed · 1 changed" in page.locator("#diff-summary").inner_text()
    assert "capital" in page.locator("#diff-added").inner_text()
    assert "product" in page.locator("#diff-removed").inner_text()
    assert "v1 → v2" in page.locator("#diff-changed").inner_text()
