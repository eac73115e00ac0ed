"""The upload report: duplicates collapse into a count with a sample naming the task they match,
the imported tasks are linked, and JSON errors read as English."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.factories import import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db


def upload(client, data: bytes):
    return client.post(
        reverse("task_upload"), {"environment": "arithmetic", "file": SimpleUploadedFile("tasks.jsonl", data)}
    ).content.decode()


def test_many_duplicates_collapse_to_a_count_with_a_sample_that_names_the_task(client, alice, arithmetic):
    tasks = [math_task(f"t-{i}", question=f"What is {i} + 1?", answer=str(i + 1)) for i in range(25)]
    import_tasks(arithmetic, alice, *tasks)
    client.force_login(alice)
    page = upload(
        client,
        jsonl(
            *[{**task, "key": f"again-{i}"} for i, task in enumerate(tasks)],
            math_task("new", question="What is 7 * 7?", answer="49"),
        ),
    )
    assert "25 duplicates skipped (content already in arithmetic or earlier in the file); the first 10" in page
    assert "line 1 (again-0): same content as task t-0 in arithmetic" in page
    assert "line 11 (again-10)" not in page
    assert f'href="{reverse("task_detail", args=["arithmetic", "new"])}"' in page
    assert 'id="imported-tasks-link"' in page and "mine=1" in page
    assert 'id="similarity-note"' in page  # the checks run after the upload, and the page says so


def test_json_errors_say_at_column_once(client, alice, arithmetic):
    client.force_login(alice)
    page = upload(client, b'{"prompt": "unterminated\n')
    assert "Unterminated string starting at column 12" in page and "at at" not in page
