"""The weak-test check through a background import in a real Celery worker: the worker's audit grades the
mutants in the sandbox, flags the example-only task and stores the share for its card."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from curation import import_jobs
from curation.models import ImportJob
from curation.services import environment_create
from releases.quality_cards import quality_card_of
from tests.factories import GRADE_BOUNDARIES, GRADE_EXAMPLE_ONLY, grade_task, jsonl
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.workers]


@pytest.mark.django_db(transaction=True)
def test_a_worker_import_flags_weak_tests_and_the_card_carries_the_share(alice, settings, tmp_path):
    flush_broker()
    var = tmp_path / "var"
    settings.MEDIA_ROOT = var / "media"  # the worker reads the stored upload from the same storage
    grading = environment_create(name="grading", domain="code")
    data = jsonl(grade_task("example-only", test=GRADE_EXAMPLE_ONLY), grade_task("boundaries", test=GRADE_BOUNDARIES))
    with running_worker(queues="default", extra_env={"PASSBAND_VAR_DIR": str(var)}, log_path=tmp_path / "worker.log"):
        job = import_jobs.import_job_create(
            environment=grading, owner=alice, upload=SimpleUploadedFile("grading.jsonl", data)
        )

        def finished():
            job.refresh_from_db()
            return job.status in (ImportJob.Status.DONE, ImportJob.Status.REJECTED, ImportJob.Status.FAILED)

        wait_for(finished, timeout=180, what="the worker's import")
    assert job.status == ImportJob.Status.DONE, job.report
    assert [line.split(":")[0] for line in job.report["weak_tests"]] == ["line 1 (example-only)"]
    cards = {
        key: quality_card_of(version=grading.tasks.get(key=key).current_version)["weak_tests"]
        for key in ("example-only", "boundaries")
    }
    assert cards["example-only"]["flagged"] and cards["example-only"]["surviving_mutant_share"] > 0.5
    assert cards["boundaries"] == {**cards["boundaries"], "flagged": False, "survived": 0, "status": "run"}
