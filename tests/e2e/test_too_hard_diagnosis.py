"""A too-hard task's diagnosis in the browser: from the dashboard's count to the filtered task list, and
from there to the task page's evidence."""

import pytest

from calibration import services
from tests.factories import TOO_HARD_MAX_NEW_TOKENS, too_hard_answer, too_hard_probe, too_hard_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_author_follows_a_suspect_verifier_from_the_dashboard_to_its_evidence(
    page, live_server, sign_in, alice, arithmetic, screenshot
):
    with serve_openai(respond=too_hard_answer) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=TOO_HARD_MAX_NEW_TOKENS
        )
        too_hard_tasks(arithmetic, alice)
        too_hard_probe(arithmetic, alice, model)
    sign_in(page, "alice")
    page.goto(live_server.url + "/dashboard/?environment=arithmetic&model=fake")
    table = page.locator("#too-hard-diagnoses")
    row = table.locator("tr", has_text="suspect verifier")
    assert row.locator("td.num").inner_text() == "1"
    row.locator("a").click()
    page.wait_for_url("**/tasks/?*diagnosis=suspect_verifier*")
    assert page.input_value("select[name=diagnosis]") == "suspect_verifier"
    assert page.locator("table.data tbody tr").count() == 1
    page.click("text=prose")
    page.wait_for_url("**/tasks/arithmetic/prose/")
    card = page.locator("#diagnosis-fake")
    assert "suspect verifier" in card.locator("h3").inner_text()
    assert "16 of 16 refused completions gave the reference value" in card.inner_text()
    examples = card.locator(".diagnosis-examples li")
    assert examples.count() == 3  # the latest three; each already wrote the reference, so no rewritten copy
    assert "refused, although its final answer 42 has the reference value" in examples.nth(0).inner_text()
    screenshot(page, "too-hard-diagnosis")
    # The list's own filter form chooses a diagnosis too.
    page.goto(live_server.url + "/tasks/?environment=arithmetic")
    page.select_option("select[name=diagnosis]", "truncated")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**diagnosis=truncated*")
    assert page.locator("table.data tbody tr").inner_text().startswith("long")
