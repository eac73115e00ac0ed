"""Hostile Markdown in a prompt renders as text or a dead link: clicking it runs no script."""

import pytest

from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = (
    "Read the [hint](javascript:document.cookie='pwned=1';void(0)) first.\n\n"
    "Or the [other hint][ref] or [this one](JaVaScRiPt:document.cookie='pwned=2';void(0)).\n\n"
    "[ref]: javascript:document.cookie='pwned=3';void(0)\n\n"
    "<img src=x onerror=\"document.cookie='pwned=4'\"> and [a fine link](https://example.org/)"
)


def test_javascript_links_in_a_prompt_do_not_run(page, live_server, sign_in, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("hostile", question=HOSTILE))
    sign_in(page, "bob")
    page.goto(live_server.url + "/tasks/arithmetic/hostile/")
    page.wait_for_selector(".markdown.rendered")
    links = page.eval_on_selector_all(".markdown.rendered a", "links => links.map(a => a.getAttribute('href'))")
    assert "https://example.org/" in links
    assert not [href for href in links if href and "script" in href.lower()]
    for text in ("hint", "other hint", "this one"):
        anchor = page.get_by_text(text, exact=True)
        if anchor.count():
            anchor.first.click()
    assert "pwned" not in page.evaluate("document.cookie")
    assert page.locator(".markdown.rendered img[onerror]").count() == 0
    # The page also carries a policy that forbids inline script, whatever slips through.
    response = page.request.get(live_server.url + "/tasks/arithmetic/hostile/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
