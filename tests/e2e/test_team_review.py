"""Two reviewers and a lead in real browsers: bob claims a task and dora no longer sees it; the lead
reassigns it to dora; dora rejects it, but it was drawn for two reviews, so bob reviews it blind (never
seeing dora's decision or reason) and approves; the lead adjudicates the disagreement on her page and
the agreement page reports the pair. Every page under the strict CSP."""

import pytest

from curation.models import TaskStatus
from review.models import ReviewClaim
from tests.review.test_review import submitted

pytestmark = pytest.mark.django_db(transaction=True)


def test_claim_reassign_blind_second_review_and_adjudication(
    settings, new_context, live_server, sign_in, alice, bob, dora, lena, arithmetic
):
    settings.PASSBAND_DOUBLE_REVIEW_SHARE = 1.0
    submitted(arithmetic, alice, "t-1", "t-2")
    people = {}
    for name in ("bob", "dora", "lena"):
        people[name] = new_context(viewport={"width": 1400, "height": 1000}).new_page()
        sign_in(people[name], name)
    bob_page, dora_page, lena_page = people["bob"], people["dora"], people["lena"]

    # bob claims the first task of his queue; dora's queue no longer has it.
    bob_page.goto(live_server.url + "/review/")
    assert bob_page.locator("#review-task").get_attribute("data-key") == "t-1"
    bob_page.click("#claim-form button")
    bob_page.wait_for_selector("text=is yours until your claim expires")
    assert "Held by bob" in bob_page.locator("#claim-state").inner_text()
    dora_page.goto(live_server.url + "/review/")
    assert dora_page.locator("#review-task").get_attribute("data-key") == "t-2"
    assert "1 task waiting" in dora_page.locator("h1").inner_text()

    # The lead sees who holds what and gives t-1 to dora.
    lena_page.goto(live_server.url + "/review/claims/")
    row = lena_page.locator('#claims tr[data-key="t-1"]')
    assert "bob" in row.inner_text()
    row.locator("select[name=reviewer]").select_option(label="dora")
    row.locator(".reassign-form button").click()
    lena_page.wait_for_selector("text=t-1 is now held by dora.")
    assert ReviewClaim.objects.get(task__key="t-1").reviewer.username == "dora"

    # dora rejects it; drawn for two reviews, the decision is kept blind.
    dora_page.goto(live_server.url + "/review/")
    assert dora_page.locator("#review-task").get_attribute("data-key") == "t-1"
    dora_page.click("button[data-open=reject-form]")
    dora_page.fill("#reject-comment", "DORA-REASON: the answer is off by one")
    dora_page.select_option("#reject-defect", "wrong_answer")
    dora_page.click("#reject-form button[type=submit]")
    dora_page.wait_for_selector("text=kept blind until a second reviewer")
    assert arithmetic.tasks.get(key="t-1").status == TaskStatus.IN_REVIEW

    # bob reviews it blind and approves.
    bob_page.goto(live_server.url + "/review/second/")
    shown = bob_page.locator("#blind-task").inner_text()
    assert "t-1: what is 0 + 1?" in shown
    assert "DORA-REASON" not in bob_page.content() and "dora" not in bob_page.locator("main").inner_text()
    bob_page.check("input[name=verdict][value=pass]")
    bob_page.fill("textarea[name=note]", "BOB-NOTE: 1 is right")
    bob_page.click("#blind-verdict-form button[type=submit]")
    bob_page.wait_for_selector("text=Your review is recorded.")
    assert bob_page.locator("#blind-empty").is_visible()

    # The lead settles the disagreement: reject.
    lena_page.goto(live_server.url + "/review/adjudication/")
    card = lena_page.locator('.adjudication[data-key="t-1"]')
    assert "DORA-REASON" in card.inner_text() and "BOB-NOTE" in card.inner_text()
    card.locator("input[name=verdict][value=fail]").check()
    card.locator("textarea[name=comment]").fill("off by one indeed")
    card.locator("button[type=submit]").click()
    lena_page.wait_for_selector("text=t-1 settled.")
    assert lena_page.locator("#adjudication-empty").is_visible()
    assert arithmetic.tasks.get(key="t-1").status == TaskStatus.REJECTED

    # Agreement: one task for the pair, none agreeing.
    bob_page.goto(live_server.url + "/review/agreement/")
    pair = bob_page.locator("#pair-agreement tbody tr").first.inner_text()
    assert "bob · dora" in pair and "0/1" in pair
