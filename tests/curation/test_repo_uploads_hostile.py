"""Hostile repository uploads with a real git: a "bundle" that is a gitfile naming a repository of the
server, and a bundle with prerequisites. Each is refused with a 400 that names the file and echoes nothing
of the server's, and nothing is stored."""

import subprocess

import pytest

from curation.models import Task
from tests.curation.test_repo_tasks import tiny_row
from tests.curation.test_repo_uploads import (  # noqa: F401 - repositories is a fixture
    git_repository,
    jsonl,
    page_upload,
    repositories,
    stored_snapshots,
)
from tests.engine.repo_tasks.tiny_repo import FILES

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("repositories")]
SECRET = "passband-server-secret-7f3a9c"


@pytest.fixture
def server_repository(tmp_path):
    """A repository on the server's disk that would pass the task's audit, with a secret in it."""
    folder = tmp_path / "server-repository"
    git_repository(folder, {**FILES, "secret.txt": SECRET + "\n"})
    return folder


def upload_bundle(client, git, folder, name, *revisions):
    """The page's answer to a bundle of ``revisions`` of the repository ``git`` works in, named ``name``."""
    subprocess.run([*git, "bundle", "create", "-q", str(folder / name), *revisions], check=True)
    return page_upload(client, tasks=jsonl(tiny_row(name)), snapshots_={name: (folder / name).read_bytes()})


@pytest.mark.parametrize("target", [".git", ""])
def test_a_gitfile_upload_cannot_make_git_read_a_repository_of_the_server(
    client, alice, media, server_repository, target
):
    gitfile = f"gitdir: {server_repository / target}\n".replace("/\n", "\n").encode()
    client.force_login(alice)
    response = page_upload(client, tasks=jsonl(tiny_row("calc.bundle")), snapshots_={"calc.bundle": gitfile})
    page = response.content.decode()
    assert response.status_code == 400
    assert "calc.bundle: not a git bundle Passband reads: not a git bundle" in page
    assert SECRET not in page and "secret.txt" not in page
    assert not Task.objects.exists() and stored_snapshots(media) == []


def test_a_bundle_with_prerequisites_is_refused(client, alice, media, tmp_path):
    git = git_repository(tmp_path / "calc", FILES, commits=2)
    client.force_login(alice)
    response = upload_bundle(client, git, tmp_path, "thin.bundle", "HEAD~1..HEAD")
    assert response.status_code == 400
    assert "thin.bundle: not a git bundle Passband reads: the bundle has prerequisites" in response.content.decode()
    assert not Task.objects.exists() and stored_snapshots(media) == []


def test_a_bundle_whose_tree_holds_a_link_is_refused(client, alice, media, tmp_path):
    git = git_repository(tmp_path / "calc", FILES)
    (tmp_path / "calc" / "passwd").symlink_to("/etc/passwd")
    subprocess.run([*git, "add", "passwd"], check=True)
    subprocess.run([*git, "commit", "-qm", "link"], check=True)
    client.force_login(alice)
    response = upload_bundle(client, git, tmp_path, "link.bundle", "HEAD")
    assert response.status_code == 400
    assert "link.bundle: not a git bundle Passband reads: passwd: only regular files" in response.content.decode()
    assert "root:" not in response.content.decode()
    assert not Task.objects.exists()
