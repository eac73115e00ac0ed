"""An author uploads a file with a bad line, fixes it, uploads, probes, and sees bands appear.

The probe is real: a Celery worker process (Redis broker, the test database) asks an
OpenAI-compatible server on a socket for completions and scores them with the math verifier.
"""

import pytest

from calibration.models import Calibration, Campaign
from calibration.services import probe_model_add
from tests.factories import jsonl, math_task
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker
from web.templatetags.display import band_label

pytestmark = pytest.mark.django_db(transaction=True)


def answers(prompt_text: str, seed: int) -> str:
    """Right a quarter of the time on the sum, always right on the product, never on the riddle."""
    if "2 + 3" in prompt_text:
        return "The answer is 5." if seed % 4 == 0 else "The answer is 6."
    if "4 * 5" in prompt_text:
        return "The answer is 20."
    return "I do not know."


def test_upload_fix_probe_and_see_bands(
    page, live_server, sign_in, screenshot, alice, arithmetic, tmp_path, allow_console_errors
):
    # The file with a bad line is refused with a 400 (the page shows which line and field), on purpose.
    allow_console_errors.append(
        "/tasks/upload/?environment=arithmetic: Failed to load resource: the server responded with a status of 400"
    )
    good = [
        math_task("sum", question="What is 2 + 3?", answer="5"),
        math_task("product", question="What is 4 * 5?", answer="20"),
    ]
    bad_file = tmp_path / "tasks.jsonl"
    bad_file.write_bytes(jsonl(good[0], '{"prompt": 3, "answer": "1"}', good[1]))

    sign_in(page, "alice")
    page.goto(live_server.url + "/tasks/upload/?environment=arithmetic")
    page.set_input_files("input[name=file]", str(bad_file))
    page.click("#upload-form button[type=submit]")
    report = page.wait_for_selector("#import-report")
    text = report.inner_text()
    assert "Nothing was imported" in text and "2\tprompt\tmust be a non-empty string" in text
    assert arithmetic.tasks.count() == 0

    bad_file.write_bytes(jsonl(*good))
    page.set_input_files("input[name=file]", str(bad_file))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("text=2 new task(s)")
    assert arithmetic.tasks.count() == 2

    flush_broker()
    with OpenAITestServer(respond=answers) as server, running_worker(queues="default,generate,verify", concurrency=1):
        probe_model_add(
            name="fake-probe", backend="openai", base_url=server.base_url, model="fake-model", max_new_tokens=16
        )
        page.goto(live_server.url + "/")
        card = page.locator("#environment-arithmetic")
        card.locator("select[name=policy]").select_option("fixed")
        card.locator("input[name=rollouts]").fill("8")
        card.locator("button", has_text="Probe").click()
        # The estimate comes first; starting is a second, deliberate click.
        page.wait_for_selector("#probe-estimate")
        page.click("#probe-start")
        page.wait_for_url("**/campaigns/*/")
        # htmx polls the progress fragment; the bands appear without a reload.
        page.wait_for_selector("#campaign-progress [data-status=done]", timeout=180_000)
        page.wait_for_selector("#campaign-progress .band")
        bands_text = page.inner_text("#campaign-progress .bands")
    campaign = Campaign.objects.get()
    bands = dict(
        Calibration.objects.filter(probe_model=campaign.probe_model).values_list("task_version__task__key", "band")
    )
    assert set(bands) == {"sum", "product"}
    for band in bands.values():
        assert band_label(band) in bands_text
    assert Calibration.objects.get(task_version__task__key="product").successes == 8
    assert Calibration.objects.get(task_version__task__key="sum").attempts == 8
    screenshot(page, "campaign-bands")

    # The task page shows the calibration; the editor previews Markdown and LaTeX.
    page.goto(live_server.url + "/tasks/arithmetic/sum/edit/")
    page.fill("#prompt", "Compute $\\frac{1}{2} + a_1 + a_2$ and **explain**.")
    page.wait_for_selector("#preview .katex")
    assert page.locator("#preview strong").inner_text() == "explain"
    assert page.locator("#preview em").count() == 0  # the underscores stayed LaTeX subscripts
    screenshot(page, "task-editor")
