"""The gameability flag in the browser: the review queue shows what paid, Approve is refused until a
reviewer overrides with a reason, and the task page says who overrode it and why."""

import pytest

from curation.models import TaskStatus
from curation.services import task_transition
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_gameable_task_needs_an_override_before_approval(page, live_server, sign_in, alice, bob, arithmetic):
    weak = {"kind": "regex", "pattern": "5", "mode": "search"}
    import_tasks(arithmetic, alice, math_task("weak-sum", "What is 2 + 3?", "5", verifier=weak), run_audits=True)
    task = arithmetic.tasks.get()
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    # The task is unprobed, so Approve asks first (tests/e2e/test_review_truths.py): the reviewer says yes.
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, "bob")
    page.goto(live_server.url + "/review/")
    page.wait_for_selector("#gameable-flag")
    assert "every small integer listed" in page.inner_text(".gameable-findings")
    page.click("#approve-button")
    page.wait_for_selector("text=cannot be approved")
    task.refresh_from_db()
    assert task.status == TaskStatus.SUBMITTED
    page.fill("#override-gameable-reason", "this model never lists numbers")
    page.click("#override-gameable-form button[type=submit]")
    page.wait_for_selector("text=may be approved despite its gameability flag")
    page.click("#approve-button")
    page.wait_for_selector("text=was approved")
    task.refresh_from_db()
    assert task.status == TaskStatus.APPROVED
    page.goto(live_server.url + "/tasks/arithmetic/weak-sum/")
    assert "this model never lists numbers" in page.inner_text("#gameable-override")
