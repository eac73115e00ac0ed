"""A reviewer sees a paraphrase next to its original and keeps one of the two in the browser."""

import pytest

from curation.models import Task, TaskStatus
from similarity import services
from tests.factories import import_tasks
from tests.similarity.texts import TRAIN, TRAIN_PARAPHRASE, humaneval, task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def flagged(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        task("train", TRAIN),
        task("train-again", TRAIN_PARAPHRASE),
        task("copy", "Solve in Python:\n\n" + humaneval("HumanEval/0")["prompt"]),
    )
    Task.objects.filter(key="train").update(status=TaskStatus.APPROVED)
    Task.objects.filter(key__in=["train-again", "copy"]).update(status=TaskStatus.SUBMITTED)
    services.versions_index()


def test_reviewer_compares_and_keeps_one(page, live_server, sign_in, screenshot, flagged, bob):
    sign_in(page, "bob")
    page.goto(live_server.url + "/review/?flag=near_duplicate")
    page.wait_for_selector(".similarity-flag[data-kind=near_duplicate] .side-by-side")
    assert TRAIN in page.inner_text("#similarity-flags") and TRAIN_PARAPHRASE in page.inner_text("#similarity-flags")
    screenshot(page, "review-near-duplicate")

    page.goto(live_server.url + "/tasks/arithmetic/copy/")
    assert "HumanEval/0" in page.inner_text(".similarity-flag[data-kind=contaminated]")
    screenshot(page, "task-contaminated")

    page.click("#nav-review summary")  # the Review group of the navigation
    page.click("#nav-review >> text=Duplicates")
    page.wait_for_selector("section.cluster[data-size='2']")
    screenshot(page, "duplicates")
    keep_one = "section.cluster button.danger"
    with page.expect_event("dialog") as dialog:  # dismissed: nothing changes
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.click(keep_one)
    assert dialog.value.message.startswith("Keep the chosen task and retire or reject the other 1?")
    page.reload()
    page.wait_for_selector("section.cluster[data-size='2']")
    assert Task.objects.get(key="train-again").status == TaskStatus.SUBMITTED
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(keep_one)
    page.wait_for_selector("text=No open near-duplicate clusters")
    assert "rejected arithmetic/train-again" in page.inner_text("main")
    assert Task.objects.get(key="train-again").status == TaskStatus.REJECTED
    assert Task.objects.get(key="train").status == TaskStatus.APPROVED
