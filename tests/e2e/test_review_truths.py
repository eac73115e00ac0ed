"""Review says what it does: approving a too-hard task asks first, bands have one spelling, comments
render LaTeX; the task list counts row numbers as numbers."""

import pytest

from calibration.models import Band, Calibration, ProbeModel
from curation.models import Comment, TaskStatus
from curation.services import task_transition
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def too_hard(alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("hard-sum", question="What is $\\sum_{k=1}^{100} k$?", answer="5050"))
    task = arithmetic.tasks.get()
    model = ProbeModel.objects.create(name="probe", backend="openai")
    Calibration.objects.create(
        task_version=task.current_version, probe_model=model, band=Band.TOO_HARD, attempts=8, successes=0
    )
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    Comment.objects.create(task=task, author=alice, body="Is $\\frac{a}{b}$ right?")
    return task


def test_approving_a_too_hard_task_asks_first(page, live_server, sign_in, bob, too_hard):
    sign_in(page, "bob")
    page.goto(live_server.url + "/review/")
    page.wait_for_selector("#review-task[data-key=hard-sum]")
    questions = []

    def dismiss(dialog):
        questions.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#approve-button")
    assert questions and "too hard" in questions[0] and "hard-sum" in questions[0]
    too_hard.refresh_from_db()
    assert too_hard.status == TaskStatus.SUBMITTED  # said no: nothing happened
    page.once("dialog", lambda dialog: dialog.accept())
    page.keyboard.press("a")  # the shortcut asks too
    page.wait_for_selector("text=was approved")
    too_hard.refresh_from_db()
    assert too_hard.status == TaskStatus.APPROVED


def test_bands_have_one_spelling_and_comments_render_latex(page, live_server, sign_in, bob, too_hard):
    sign_in(page, "bob")
    for path in ("/review/", f"/tasks/arithmetic/{too_hard.key}/", "/tasks/", "/"):
        page.goto(live_server.url + path)
        text = page.inner_text("main")
        assert "too_hard" not in text, path
        assert "too hard" in text, path
    page.goto(live_server.url + f"/tasks/arithmetic/{too_hard.key}/")
    comment = page.locator("#comments .thread .body").first
    comment.locator(".katex").first.wait_for()
    assert "\\frac" not in comment.inner_text()


def test_row_number_keys_sort_as_numbers_in_the_task_list(page, live_server, sign_in, alice, arithmetic):
    keys = ["gsm8k/test/10", "gsm8k/test/2", "gsm8k/test/1", "gsm8k/test/11", "gsm8k/test/3"]
    import_tasks(arithmetic, alice, *[math_task(key, question=f"What is {key[-2:]} + 1?") for key in keys])
    sign_in(page, "alice")
    page.goto(live_server.url + "/tasks/?environment=arithmetic")
    shown = page.locator("main table.data tbody tr td:first-child a").all_inner_texts()
    assert shown == ["gsm8k/test/1", "gsm8k/test/2", "gsm8k/test/3", "gsm8k/test/10", "gsm8k/test/11"]
    page.goto(live_server.url + "/tasks/?environment=arithmetic&sort=-key")
    shown = page.locator("main table.data tbody tr td:first-child a").all_inner_texts()
    assert shown == ["gsm8k/test/11", "gsm8k/test/10", "gsm8k/test/3", "gsm8k/test/2", "gsm8k/test/1"]
