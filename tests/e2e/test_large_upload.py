"""A thousand tasks through the browser: the upload goes to a real worker, the page follows it."""

import pytest

from curation.models import ImportJob
from tests.factories import jsonl, math_task
from tests.support.workers import flush_broker, running_worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_thousand_tasks_import_in_the_background_and_the_page_follows(
    page, live_server, sign_in, screenshot, alice, arithmetic, settings, tmp_path
):
    settings.PASSBAND_IMPORT_INLINE_BYTES = 10_000  # this file is ~130 KB: it goes to a worker
    upload = tmp_path / "thousand.jsonl"
    upload.write_bytes(
        jsonl(*[math_task(f"gen/{i:04d}", question=f"What is {i} + {i}?", answer=str(2 * i)) for i in range(1000)])
    )

    flush_broker()
    with running_worker(queues="default", concurrency=1):
        sign_in(page, "alice")
        page.goto(live_server.url + "/tasks/upload/?environment=arithmetic")
        page.set_input_files("input[name=file]", str(upload))
        page.click("#upload-form button[type=submit]")
        page.wait_for_url("**/tasks/upload/*/")
        # htmx polls the job until its report replaces the progress bar.
        page.wait_for_selector("#import-report", timeout=180_000)
        text = page.inner_text("#import-job")
    assert "1000 new tasks" in text.replace(",", "") and "done" in text
    assert ImportJob.objects.get().status == ImportJob.Status.DONE
    assert arithmetic.tasks.count() == 1000
    screenshot(page, "background-import")
