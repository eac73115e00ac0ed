"""A GSM8K-shaped Parquet file into Passband without a script: map the columns, preview, import in the background."""

import pytest

from curation.models import ImportJob, ImportMapping, Task
from tests.factories import gsm8k_rows, write_parquet
from tests.support.workers import flush_broker, running_worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_gsm8k_shaped_file_is_mapped_previewed_and_imported_in_the_browser(
    page, live_server, sign_in, screenshot, alice, arithmetic, tmp_path
):
    upload = tmp_path / "gsm8k-test.parquet"
    write_parquet(upload, gsm8k_rows(30))

    flush_broker()
    with running_worker(queues="default", concurrency=1):
        sign_in(page, "alice")
        page.goto(live_server.url + "/tasks/upload/?environment=arithmetic")
        page.set_input_files("input[name=file]", str(upload))
        page.click("#map-columns")
        page.wait_for_url("**/tasks/upload/*/map/")
        assert "question" in page.inner_text("#file-preview") and "#### 4" in page.inner_text("#file-preview")

        page.fill("input[name=prompt]", "Solve: {question}")
        page.select_option("select[name=answer_column]", "answer")
        page.select_option("select[name=answer_extractor]", "after_hashes")
        page.select_option("select[name=key_column]", "#row")
        page.fill("input[name=key_prefix]", "gsm8k/test/")
        page.fill("input[name=save_as]", "gsm8k")
        page.click("#preview-button")
        page.wait_for_selector("#task-preview")
        tasks = page.locator("#preview-tasks .preview-task")
        assert tasks.count() == 5
        first = tasks.first.inner_text()
        assert "gsm8k/test/1" in first and "Solve: Mia has 3 apples and buys 1 more." in first
        assert page.locator(".preview-answer").first.inner_text() == "4" and not Task.objects.exists()
        screenshot(page, "mapped-import-preview")

        page.click("#import-button")
        page.wait_for_url("**/tasks/upload/*/")
        page.wait_for_selector("#import-report", timeout=180_000)  # the worker's report replaces the progress bar
        text = page.inner_text("#import-job")
    assert "30 new tasks" in text and "done" in text
    assert ImportJob.objects.get().status == ImportJob.Status.DONE
    assert (
        arithmetic.tasks.count() == 30 and ImportMapping.objects.filter(environment=arithmetic, name="gsm8k").exists()
    )
    version = Task.objects.get(key="gsm8k/test/30").current_version
    assert version.answer == "91" and version.verifier == {"kind": "math"} and version.audit_passed
    screenshot(page, "mapped-import-done")
