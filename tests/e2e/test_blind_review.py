"""A reviewer gives blind verdicts in a real browser at phone width (the form, its CSRF token, the CSP),
then the judge's page warns: the judge passed both responses and the reviewer failed one."""

import pytest

from calibration import services
from review.models import BlindReview
from tests.factories import judge_task, rollouts_with

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}


def test_a_reviewer_judges_blind_and_the_judge_page_warns(new_context, live_server, sign_in, alice, bob, arithmetic):
    task = judge_task(arithmetic, alice, "blind-1")
    rollouts_with(task, alice, ["pass", "pass"], text="It is five, I believe ({index}).")
    services.judge_samples_draw(share=1.0, limit=10)
    page = new_context(viewport=PHONE, is_mobile=True, has_touch=True).new_page()
    sign_in(page, "bob")
    for verdict in ("fail", "pass"):
        page.goto(live_server.url + "/review/blind/")
        assert page.locator("#blind-response").inner_text().startswith("It is five")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.check(f"input[name=verdict][value={verdict}]")
        page.fill("textarea[name=note]", f"my {verdict}")
        page.click("#blind-verdict-form button[type=submit]")
        page.wait_for_selector("text=Verdict recorded.")
    assert page.locator("#blind-empty").is_visible()
    assert sorted(BlindReview.objects.values_list("verdict", "note")) == [("fail", "my fail"), ("pass", "my pass")]
    page.goto(live_server.url + "/judges/grader/")
    warning = page.locator("#false-pass-warning")
    assert "People failed 1 of the 2 responses" in warning.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
