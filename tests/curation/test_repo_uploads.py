"""Repository snapshots uploaded with their task rows, on the upload page and over the API: stored once by
content hash, a git bundle read by git in the sandbox, every problem naming file, line and field, a snapshot
whose tests cannot run here refused with the failing output, and nothing written by a refused upload."""

import json
import subprocess

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounts.services import api_token_create
from curation import import_jobs
from curation.models import ImportJob, Task
from curation.services import environment_create
from engine.repo_tasks import snapshots
from tests.curation.test_repo_tasks import _with_git, tiny_row
from tests.engine.repo_tasks.tiny_repo import FILES

pytestmark = pytest.mark.django_db


@pytest.fixture
def repositories(db, media):
    return environment_create(name="repositories", domain="code")


SNAPSHOT = snapshots.build_from_files({path: text.encode() for path, text in FILES.items()})
MISSING_PACKAGE = {
    **FILES,
    "tests/test_more.py": "import passband_no_such_package\n\n\ndef test_add_negative():\n    pass\n",
}


def jsonl(*rows) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def stored_snapshots(media) -> list[str]:
    folder = media / "repo-snapshots"
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def git_repository(folder, files, *, commits=1) -> list[str]:
    """A real git repository of ``files`` with ``commits`` commits; the git command line that works in it."""
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@example.org", "-C", str(folder)]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    for number in range(commits):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"commit {number}"], check=True)
    return git


def page_upload(client, *, tasks: bytes, snapshots_: dict[str, bytes], filename="tasks.jsonl"):
    files = [SimpleUploadedFile(name, data) for name, data in snapshots_.items()]
    return client.post(
        reverse("task_upload"),
        {"environment": "repositories", "file": SimpleUploadedFile(filename, tasks), "snapshots": files},
    )


def test_a_snapshot_uploaded_on_the_page_with_its_rows_is_stored_once_and_named_by_digest(
    client, alice, repositories, media
):
    client.force_login(alice)
    response = page_upload(client, tasks=jsonl(tiny_row("calc.tar.gz")), snapshots_={"calc.tar.gz": SNAPSHOT})
    assert response.status_code == 200, response.content.decode()[-2000:]
    version = Task.objects.get(key="calc-clamp").versions.get()
    assert version.verifier["snapshot"] == snapshots.digest_of(SNAPSHOT)  # the name became the digest
    # The same repository again, for a second task, by digest: one stored object.
    second = tiny_row(snapshots.digest_of(SNAPSHOT), key="calc-clamp-2")
    second["prompt"] += " Keep add() as it is."
    response = page_upload(client, tasks=jsonl(second), snapshots_={"again.tgz": SNAPSHOT})
    assert response.status_code == 200, response.content.decode()[-2000:]
    assert stored_snapshots(media) == [snapshots.digest_of(SNAPSHOT).removeprefix("sha256:") + ".tar.gz"]
    assert Task.objects.count() == 2


def test_a_git_bundle_becomes_the_snapshot_of_its_head(client, alice, repositories, media, tmp_path):
    git = git_repository(tmp_path / "calc", FILES)
    subprocess.run([*git, "bundle", "create", "-q", str(tmp_path / "calc.bundle"), "HEAD", "--all"], check=True)
    client.force_login(alice)
    response = page_upload(
        client,
        tasks=jsonl(tiny_row("calc.bundle")),
        snapshots_={"calc.bundle": (tmp_path / "calc.bundle").read_bytes()},
    )
    assert response.status_code == 200, response.content.decode()[-2000:]
    # The same files as the tar.gz give the same snapshot: built the one deterministic way.
    assert Task.objects.get().versions.get().verifier["snapshot"] == snapshots.digest_of(SNAPSHOT)
    not_a_bundle = page_upload(client, tasks=jsonl(tiny_row("x.bundle")), snapshots_={"x.bundle": b"garbage"})
    assert not_a_bundle.status_code == 400
    assert "x.bundle: not a git bundle Passband reads" in not_a_bundle.content.decode()


def test_bad_uploads_name_file_line_and_field_and_write_nothing(client, alice, repositories, media):
    client.force_login(alice)
    with_git = _with_git()
    damaged = page_upload(client, tasks=jsonl(tiny_row("calc.tar.gz")), snapshots_={"calc.tar.gz": with_git})
    assert damaged.status_code == 400
    assert "calc.tar.gz: snapshot member .git/HEAD: .git is not part of a snapshot" in damaged.content.decode()
    unknown = page_upload(
        client,
        tasks=jsonl(tiny_row("calc.tar.gz"), tiny_row("other.tar.gz", key="b")),
        snapshots_={"calc.tar.gz": SNAPSHOT},
    )
    assert unknown.status_code == 400
    page = unknown.content.decode()
    assert '<td class="num">2</td><td>verifier.snapshot</td><td>&#x27;other.tar.gz&#x27; is neither' in page
    wrong_kind = page_upload(client, tasks=b"key,prompt\n", snapshots_={"calc.zip": SNAPSHOT}, filename="tasks.csv")
    assert wrong_kind.status_code == 400
    assert "tasks uploaded with snapshots come as JSON Lines" in wrong_kind.content.decode()
    assert not Task.objects.exists()


def test_a_snapshot_whose_tests_cannot_run_here_is_refused_with_the_output_and_nothing_is_kept(
    client, alice, repositories, media
):
    client.force_login(alice)
    data = snapshots.build_from_files({path: text.encode() for path, text in MISSING_PACKAGE.items()})
    response = page_upload(client, tasks=jsonl(tiny_row("calc.tar.gz")), snapshots_={"calc.tar.gz": data})
    assert response.status_code == 400
    page = response.content.decode()
    assert "PASS_TO_PASS test tests/test_more.py::test_add_negative does not pass" in page
    assert "ModuleNotFoundError: No module named &#x27;passband_no_such_package&#x27;" in page
    assert not Task.objects.exists() and stored_snapshots(media) == []


def test_the_api_takes_snapshots_with_their_rows(client, alice, repositories, media):
    token = api_token_create(user=alice, name="upload", scopes=["curate"])[1]
    url = reverse("api_repo_upload")

    def post(tasks: bytes, named: dict[str, bytes]):
        return client.post(
            url,
            {
                "environment": "repositories",
                "tasks": SimpleUploadedFile("tasks.jsonl", tasks),
                "snapshots": [SimpleUploadedFile(name, data) for name, data in named.items()],
            },
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    refused = post(jsonl(tiny_row("nope.tar.gz")), {"calc.tar.gz": SNAPSHOT})
    assert refused.status_code == 400
    problems = refused.json()["report"]["problems"]
    assert ["tasks.jsonl", 1, "verifier.snapshot"] == problems[0][:3]
    assert ["calc.tar.gz", 0, ""] == problems[1][:3] and "no task row names this snapshot" in problems[1][3]
    assert stored_snapshots(media) == [] and not Task.objects.exists()
    created = post(jsonl(tiny_row("calc.tar.gz")), {"calc.tar.gz": SNAPSHOT})
    assert created.status_code == 201, created.content
    assert created.json()["report"]["created"] == ["calc-clamp"]
    assert Task.objects.get().versions.get().verifier["snapshot"] == snapshots.digest_of(SNAPSHOT)
    reader = api_token_create(user=alice, name="read", scopes=["read"])[1]
    denied = client.post(url, {"environment": "repositories"}, HTTP_AUTHORIZATION=f"Bearer {reader}")
    assert denied.status_code == 403


def test_big_snapshots_are_imported_by_a_background_job_that_keeps_no_upload(
    client, alice, repositories, media, settings, django_capture_on_commit_callbacks
):
    settings.PASSBAND_IMPORT_INLINE_BYTES = 100  # every snapshot upload goes to a worker
    client.force_login(alice)
    broken = snapshots.build_from_files({path: text.encode() for path, text in MISSING_PACKAGE.items()})
    with django_capture_on_commit_callbacks() as queued:
        refused = page_upload(client, tasks=jsonl(tiny_row("calc.tar.gz")), snapshots_={"calc.tar.gz": broken})
        accepted = page_upload(client, tasks=jsonl(tiny_row("calc.tar.gz")), snapshots_={"calc.tar.gz": SNAPSHOT})
    assert refused.status_code == accepted.status_code == 302 and len(queued) == 2
    first, second = ImportJob.objects.order_by("pk")
    assert [filename for _, filename in first.snapshots] == ["calc.tar.gz"]
    assert import_jobs.import_job_run(job_id=first.pk).status == ImportJob.Status.REJECTED
    assert not Task.objects.exists() and stored_snapshots(media) == []
    page = client.get(f"/tasks/upload/{first.pk}/").content.decode()
    assert "ModuleNotFoundError: No module named &#x27;passband_no_such_package&#x27;" in page
    assert import_jobs.import_job_run(job_id=second.pk).status == ImportJob.Status.DONE
    assert Task.objects.get().versions.get().verifier["snapshot"] == snapshots.digest_of(SNAPSHOT)
    assert stored_snapshots(media) == [snapshots.digest_of(SNAPSHOT).removeprefix("sha256:") + ".tar.gz"]
    assert sorted(path.name for path in (media / "imports").iterdir()) == []  # the uploads are gone
