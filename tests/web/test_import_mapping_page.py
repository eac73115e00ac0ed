"""The upload's column-mapping step: columns and first rows, a preview of five tasks, then a background import."""

import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from curation import files, import_jobs
from curation.models import ImportJob, ImportMapping, Task
from tests.conftest import make_user
from tests.factories import gsm8k_rows, jsonl, write_parquet

pytestmark = pytest.mark.django_db

MAPPING = {
    "prompt": "Solve: {question}",
    "answer_column": "answer",
    "answer_extractor": "after_hashes",
    "answer_pattern": "",
    "key_column": "#row",
    "key_prefix": "gsm8k/",
    "verifier_kind": "",
    "verifier_config": "",
    "save_as": "",
}


@pytest.fixture
def dave(django_user_model):
    """A second author."""
    return make_user(django_user_model, "dave", "authors")


def parquet_upload(tmp_path, rows, name="gsm8k.parquet") -> SimpleUploadedFile:
    write_parquet(tmp_path / name, rows)
    return SimpleUploadedFile(name, (tmp_path / name).read_bytes())


def staged(client, tmp_path, rows, django_capture_on_commit_callbacks, name="gsm8k.parquet"):
    """Upload with Map columns…: the file is stored and waits for its mapping; nothing is queued."""
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(
            "/tasks/upload/",
            {"environment": "arithmetic", "action": "map", "file": parquet_upload(tmp_path, rows, name)},
        )
    job = ImportJob.objects.latest("pk")
    assert response.status_code == 302 and response.url == f"/tasks/upload/{job.pk}/map/" and not queued
    assert job.status == ImportJob.Status.MAPPING
    return job


def previewed(client, job, **fields):
    response = client.post(f"/tasks/upload/{job.pk}/map/", MAPPING | fields | {"action": "preview"})
    fingerprint = re.search(r'name="previewed" value="([^"]*)"', response.content.decode()).group(1)
    return response, fingerprint


def test_the_page_shows_the_columns_the_first_rows_and_a_first_guess(
    client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    job = staged(client, tmp_path, gsm8k_rows(30), django_capture_on_commit_callbacks)
    page = client.get(f"/tasks/upload/{job.pk}/map/").content.decode()
    assert "<th>question</th><th>answer</th>" in page and "Mia has 3 apples" in page
    assert 'name="prompt" value="{question}"' in page
    assert '<option value="after_hashes" selected>' in page  # the first answer holds ####
    assert client.get(f"/tasks/upload/{job.pk}/").url == f"/tasks/upload/{job.pk}/map/"  # still to be mapped


def test_preview_shows_five_tasks_and_writes_nothing_then_import_runs_in_the_background(
    client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    job = staged(client, tmp_path, gsm8k_rows(30), django_capture_on_commit_callbacks)
    response, fingerprint = previewed(client, job)
    page = response.content.decode()
    assert response.status_code == 200 and page.count('class="preview-task"') == 5
    assert "Solve: Mia has 3 apples and buys 1 more." in page and '<div class="pre preview-answer">4</div>' in page
    assert "gsm8k/1" in page and "{&quot;kind&quot;: &quot;math&quot;}" in page and 'id="import-button"' in page
    assert not Task.objects.exists() and fingerprint

    with django_capture_on_commit_callbacks() as queued:
        response = client.post(
            f"/tasks/upload/{job.pk}/map/", MAPPING | {"action": "import", "previewed": fingerprint, "save_as": "gsm8k"}
        )
    assert response.status_code == 302 and response.url == f"/tasks/upload/{job.pk}/" and len(queued) == 1
    assert ImportMapping.objects.get(environment=arithmetic, name="gsm8k").created_by == alice
    job = import_jobs.import_job_run(job_id=job.pk)
    assert job.status == ImportJob.Status.DONE and Task.objects.count() == 30
    version = Task.objects.get(key="gsm8k/30").current_version
    assert version.answer == str(32 + 59) and version.prompt[0]["content"].startswith("Solve: Mia has 32 apples")
    assert "30 new tasks" in client.get(response.url).content.decode()
    # The job has its mapping: the page sends a second import of it to the job's page.
    assert client.get(f"/tasks/upload/{job.pk}/map/").status_code == 302

    # The same file again with the saved mapping: stable keys, nothing new.
    again = staged(client, tmp_path, gsm8k_rows(30), django_capture_on_commit_callbacks)
    page = client.get(f"/tasks/upload/{again.pk}/map/?mapping=gsm8k").content.decode()
    assert 'name="prompt" value="Solve: {question}"' in page and 'value="gsm8k/"' in page
    _, fingerprint = previewed(client, again)
    client.post(f"/tasks/upload/{again.pk}/map/", MAPPING | {"action": "import", "previewed": fingerprint})
    again = import_jobs.import_job_run(job_id=again.pk)
    assert again.status == ImportJob.Status.DONE and len(again.report["duplicates"]) == 30
    assert Task.objects.count() == 30


def test_import_needs_the_preview_of_the_same_mapping(
    client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    job = staged(client, tmp_path, gsm8k_rows(8), django_capture_on_commit_callbacks)
    _, fingerprint = previewed(client, job)
    with django_capture_on_commit_callbacks() as queued:
        unseen = client.post(f"/tasks/upload/{job.pk}/map/", MAPPING | {"action": "import", "previewed": ""})
        changed = client.post(
            f"/tasks/upload/{job.pk}/map/",
            MAPPING | {"action": "import", "previewed": fingerprint, "prompt": "{question}"},
        )
    assert unseen.status_code == changed.status_code == 400 and not queued
    assert "changed since its preview" in changed.content.decode()
    assert ImportJob.objects.get().status == ImportJob.Status.MAPPING


def test_a_bad_mapping_or_bad_rows_are_named_and_nothing_can_be_imported(
    client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    rows = gsm8k_rows(6)
    rows[1]["answer"] = "no marker here"
    job = staged(client, tmp_path, rows, django_capture_on_commit_callbacks)
    response, fingerprint = previewed(client, job, prompt="{questoin}")
    page = response.content.decode()
    assert response.status_code == 400 and "mapping: prompt" in page and "no column &#x27;questoin&#x27;" in page
    assert not fingerprint and 'id="import-button"' not in page
    response, fingerprint = previewed(client, job, prompt="Solve: {question")
    assert response.status_code == 400 and "Mapping, prompt: has a lone" in response.content.decode()
    response, fingerprint = previewed(client, job, verifier_kind="numeric", verifier_config="{oops")
    assert (
        response.status_code == 400
        and "Mapping, verifier: its settings are not valid JSON" in response.content.decode()
    )
    response, fingerprint = previewed(client, job)
    page = response.content.decode()
    assert response.status_code == 400 and "answer: has no &#x27;####&#x27;" in page and not fingerprint
    assert not Task.objects.exists()


def test_a_bad_row_deep_in_the_file_rejects_the_background_import_naming_row_and_field(
    client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    rows = gsm8k_rows(40)
    rows[36]["answer"] = "the marker is missing"
    job = staged(client, tmp_path, rows, django_capture_on_commit_callbacks)
    _, fingerprint = previewed(client, job)  # the first five rows are fine
    client.post(f"/tasks/upload/{job.pk}/map/", MAPPING | {"action": "import", "previewed": fingerprint})
    job = import_jobs.import_job_run(job_id=job.pk)
    assert job.status == ImportJob.Status.REJECTED and not Task.objects.exists()
    assert [(line, field) for _, line, field, _ in job.report["problems"]] == [(37, "answer")]
    page = client.get(f"/tasks/upload/{job.pk}/").content.decode()
    assert "<th>Row</th>" in page and "37" in page


def test_jsonl_and_csv_datasets_map_too(client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks):
    client.force_login(alice)
    csv_text = "question,answer\n" + "".join(f'"{r["question"]}","{r["answer"]}"\n' for r in gsm8k_rows(3))
    for name, data in (("g.jsonl", jsonl(*gsm8k_rows(3))), ("g.csv", csv_text.encode())):
        with django_capture_on_commit_callbacks():
            response = client.post(
                "/tasks/upload/", {"environment": "arithmetic", "action": "map", "file": SimpleUploadedFile(name, data)}
            )
        job = ImportJob.objects.latest("pk")
        response, fingerprint = previewed(client, job, key_column="", key_prefix="")
        assert response.status_code == 200 and response.content.decode().count('class="preview-task"') == 3, name


def test_who_may_map_save_and_reuse(
    client, alice, bob, charlie, dave, staff, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    job = staged(client, tmp_path, gsm8k_rows(6), django_capture_on_commit_callbacks)
    _, fingerprint = previewed(client, job)
    client.post(
        f"/tasks/upload/{job.pk}/map/", MAPPING | {"action": "import", "previewed": fingerprint, "save_as": "gsm8k"}
    )
    for user in (bob, charlie):  # a reviewer and a trainer may not import, so may not map
        client.force_login(user)
        assert client.get(f"/tasks/upload/{job.pk}/map/").status_code == 403
    client.force_login(dave)  # another author: not alice's upload to see
    assert client.get(f"/tasks/upload/{job.pk}/map/").status_code == 404

    # dave uses alice's mapping for his own file, but may not overwrite it.
    own = staged(client, tmp_path, gsm8k_rows(6, start=100), django_capture_on_commit_callbacks)
    assert 'value="gsm8k/"' in client.get(f"/tasks/upload/{own.pk}/map/?mapping=gsm8k").content.decode()
    _, fingerprint = previewed(client, own, prompt="{question}")
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(
            f"/tasks/upload/{own.pk}/map/",
            MAPPING | {"action": "import", "previewed": fingerprint, "prompt": "{question}", "save_as": "gsm8k"},
        )
    assert response.status_code == 400 and "was saved by alice; choose another name" in response.content.decode()
    assert not queued and ImportMapping.objects.get().config["prompt"] == "Solve: {question}"
    assert ImportJob.objects.get(pk=own.pk).status == ImportJob.Status.MAPPING

    client.force_login(staff)  # staff may change it
    mine = staged(client, tmp_path, gsm8k_rows(2, start=200), django_capture_on_commit_callbacks)
    _, fingerprint = previewed(client, mine, prompt="{question}")
    client.post(
        f"/tasks/upload/{mine.pk}/map/",
        MAPPING | {"action": "import", "previewed": fingerprint, "prompt": "{question}", "save_as": "gsm8k"},
    )
    assert ImportMapping.objects.get().config["prompt"] == "{question}"


def test_a_file_left_unmapped_for_a_day_is_dropped_when_its_author_stages_another(
    client, alice, arithmetic, media, tmp_path, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    old = staged(client, tmp_path, gsm8k_rows(2), django_capture_on_commit_callbacks)
    recent = staged(client, tmp_path, gsm8k_rows(2), django_capture_on_commit_callbacks)
    ImportJob.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    staged(client, tmp_path, gsm8k_rows(2), django_capture_on_commit_callbacks)
    assert not ImportJob.objects.filter(pk=old.pk).exists() and not files.stored_file_exists(old.path)
    assert ImportJob.objects.filter(pk=recent.pk).exists() and files.stored_file_exists(recent.path)


def test_a_file_that_cannot_be_read_says_so_on_the_mapping_page(
    client, alice, arithmetic, media, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks():
        client.post(
            "/tasks/upload/",
            {"environment": "arithmetic", "action": "map", "file": SimpleUploadedFile("g.parquet", b"not parquet")},
        )
    job = ImportJob.objects.get()
    response = client.get(f"/tasks/upload/{job.pk}/map/")
    assert response.status_code == 400 and "g.parquet: not a Parquet file" in response.content.decode()
    response = client.post(f"/tasks/upload/{job.pk}/map/", MAPPING | {"action": "preview"})
    assert response.status_code == 400 and 'id="import-button"' not in response.content.decode()
