"""Large uploads import in the background: stored, queued, validated a line at a time, all or nothing."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from curation import import_jobs
from curation.models import ImportJob, Task
from engine import task_files
from tests.factories import jsonl

pytestmark = pytest.mark.django_db


def task_lines(count: int, *, bad: set[int] = frozenset()) -> bytes:
    rows = []
    for index in range(1, count + 1):
        if index in bad:
            rows.append('{"key": "broken", "prompt": 7}')
        else:
            rows.append(
                {
                    "key": f"sum/{index:05d}",
                    "prompt": f"What is {index} + 1?",
                    "answer": str(index + 1),
                    "verifier": {"kind": "exact"},
                }
            )
    return jsonl(*rows)


def queue(environment, owner, data: bytes, django_capture_on_commit_callbacks, name="big.jsonl"):
    with django_capture_on_commit_callbacks() as queued:
        job = import_jobs.import_job_create(
            environment=environment, owner=owner, upload=SimpleUploadedFile(name, data), run_audits=False
        )
    assert len(queued) == 1  # the import waits for the commit
    return job


def test_a_large_file_imports_in_the_background_with_progress(
    arithmetic, alice, media, django_capture_on_commit_callbacks
):
    job = queue(arithmetic, alice, task_lines(5000), django_capture_on_commit_callbacks)
    assert job.status == ImportJob.Status.QUEUED and not Task.objects.exists()
    job = import_jobs.import_job_run(job_id=job.pk)
    assert job.status == ImportJob.Status.DONE and job.percent == 100
    assert job.lines_read == 5000 and job.bytes_read == job.size_bytes
    assert Task.objects.filter(environment=arithmetic).count() == 5000
    assert len(job.report["created"]) == 5000 and job.report["problems"] == []
    assert not list((media / "imports").iterdir())  # the stored upload is removed once imported
    assert import_jobs.import_job_run(job_id=job.pk).status == ImportJob.Status.DONE  # safe to run twice
    assert Task.objects.count() == 5000


def test_a_job_run_again_after_its_worker_died_past_its_end_drops_the_upload_left_behind(
    arithmetic, alice, media, django_capture_on_commit_callbacks
):
    """A worker killed between writing the job's end and deleting the upload: the broker gives the job again
    (late acknowledgement), and the second run imports nothing more but drops the upload."""
    job = queue(arithmetic, alice, task_lines(3), django_capture_on_commit_callbacks)
    upload = (media / job.path).read_bytes()
    job = import_jobs.import_job_run(job_id=job.pk)
    assert job.status == ImportJob.Status.DONE and not (media / job.path).exists()
    (media / job.path).write_bytes(upload)  # what the killed worker left behind
    assert import_jobs.import_job_run(job_id=job.pk).status == ImportJob.Status.DONE
    assert not (media / job.path).exists() and Task.objects.count() == 3


def test_a_bad_line_deep_in_the_file_imports_nothing_and_names_the_line(
    arithmetic, alice, media, django_capture_on_commit_callbacks
):
    job = queue(arithmetic, alice, task_lines(3000, bad={2718}), django_capture_on_commit_callbacks)
    job = import_jobs.import_job_run(job_id=job.pk)
    assert job.status == ImportJob.Status.REJECTED and not Task.objects.exists()
    assert [(line, field) for _, line, field, _ in job.report["problems"]] == [(2718, "prompt")]


def test_a_wholly_wrong_file_keeps_a_bounded_report(arithmetic, alice, media, django_capture_on_commit_callbacks):
    lines = 3 * task_files.MAX_PROBLEMS_KEPT
    job = queue(arithmetic, alice, b"not json\n" * lines, django_capture_on_commit_callbacks)
    job = import_jobs.import_job_run(job_id=job.pk)
    assert len(job.report["problems"]) == task_files.MAX_PROBLEMS_KEPT
    assert job.report["problems_not_shown"] == lines - task_files.MAX_PROBLEMS_KEPT


def test_the_upload_page_hands_big_files_to_a_job_and_shows_its_page(
    client, alice, bob, arithmetic, media, settings, django_capture_on_commit_callbacks
):
    settings.PASSBAND_IMPORT_INLINE_BYTES = 1000
    client.force_login(alice)
    upload = SimpleUploadedFile("many.jsonl", task_lines(50))
    with django_capture_on_commit_callbacks() as queued:
        response = client.post("/tasks/upload/", {"environment": "arithmetic", "file": upload})
    job = ImportJob.objects.get()
    assert response.status_code == 302 and response.url == f"/tasks/upload/{job.pk}/" and len(queued) == 1
    page = client.get(response.url).content.decode()
    assert "queued" in page and 'hx-trigger="every 1s"' in page
    import_jobs.import_job_run(job_id=job.pk)
    fragment = client.get(response.url, HTTP_HX_REQUEST="true").content.decode()
    assert "50 new tasks" in fragment and "hx-trigger" not in fragment
    client.force_login(bob)  # someone else's import is not theirs to see
    assert client.get(response.url).status_code in (403, 404)


def test_small_files_still_import_within_the_request(client, alice, arithmetic, media):
    client.force_login(alice)
    response = client.post(
        "/tasks/upload/", {"environment": "arithmetic", "file": SimpleUploadedFile("few.jsonl", task_lines(3))}
    )
    assert response.status_code == 200 and Task.objects.count() == 3 and not ImportJob.objects.exists()


def test_csv_rows_stream_too(arithmetic, alice, media, django_capture_on_commit_callbacks):
    rows = "key,prompt,answer,verifier\n" + "".join(
        f'c{i},"What is {i}, plus one?",{i + 1},"{json.dumps({"kind": "exact"}).replace(chr(34), chr(34) * 2)}"\n'
        for i in range(200)
    )
    job = queue(arithmetic, alice, rows.encode(), django_capture_on_commit_callbacks, name="rows.csv")
    assert import_jobs.import_job_run(job_id=job.pk).status == ImportJob.Status.DONE
    assert Task.objects.count() == 200
