"""Contaminated tasks can be picked out or left out: the API task list, exports and releases."""

import pytest

from accounts.services import api_token_create
from calibration.models import ProbeModel
from curation.models import Task, TaskStatus
from releases import services as releases
from releases.models import ReleaseItem
from releases.records import export_versions
from similarity import services
from tests.factories import import_tasks
from tests.similarity.texts import APPLES, TRAIN, humaneval, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def checked(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        task("copy", humaneval("HumanEval/12")["prompt"]),
        task("train", TRAIN),
        task("apples", APPLES, "8"),
    )
    Task.objects.update(status=TaskStatus.APPROVED)
    result = services.versions_index()
    assert result.contaminated == 1 and result.near_duplicates == 0
    return arithmetic


def keys(response):
    assert response.status_code == 200, response.content
    return sorted(row["key"] for row in response.json()["results"])


def test_api_task_list_filters_on_contamination(client, checked, charlie):
    secret = api_token_create(user=charlie, name="trainer", scopes=["read"])[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    assert keys(client.get("/api/v1/tasks", {"contaminated": "true"}, **auth)) == ["copy"]
    assert keys(client.get("/api/v1/tasks", {"contaminated": "false"}, **auth)) == ["apples", "train"]
    assert keys(client.get("/api/v1/tasks", {"near_duplicate": "true"}, **auth)) == []
    response = client.get("/api/v1/tasks", {"contaminated": "maybe"}, **auth)
    assert response.status_code == 400 and "contaminated" in response.json()["fields"]


def test_export_and_release_leave_contaminated_tasks_out_when_asked(
    checked, charlie, django_capture_on_commit_callbacks
):
    every = export_versions(environment=checked)
    clean = export_versions(environment=checked, exclude_contaminated=True)
    assert sorted(row["task_key"] for row in every) == ["apples", "copy", "train"]
    assert sorted(row["task_key"] for row in clean) == ["apples", "train"]

    probe_model = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    with django_capture_on_commit_callbacks():
        release = releases.release_create(
            user=charlie, probe_model=probe_model, environment=checked, band="", exclude_contaminated=True
        )
    pinned = ReleaseItem.objects.filter(release=release).values_list("task_version__task__key", flat=True)
    assert sorted(pinned) == ["apples", "train"]
    assert release.filter["exclude_contaminated"] is True


def test_export_command_option(checked, tmp_path):
    from django.core.management import call_command

    output = tmp_path / "clean.jsonl"
    call_command(
        "export", "--environment", "arithmetic", "--format", "native", "-o", str(output), "--exclude-contaminated"
    )
    assert output.read_text().count("\n") == 2
