"""Git bundles read in the sandbox (engine/repo_tasks/bundle_program.py, bundles.py): the header rules,
and the sandbox that reads them, which holds no repository of the server even if git were pointed at one."""

import subprocess

import pytest

from engine.repo_tasks import bundles, snapshots
from engine.repo_tasks.bundle_program import BundleError, read_header, snapshot_ref
from engine.sandbox import SandboxLimits
from engine.sandbox.view import SandboxView, sandbox_for

OID = "7252fee8d3f2c7a88c67d8b917da56e5c357d84c"


@pytest.mark.parametrize(
    "header, expected",
    [
        (b"gitdir: /srv/passband/.git\n", "it must begin with '# v2 git bundle'"),
        (b"/srv/passband\n", "it must begin with"),
        (f"# v2 git bundle\n-{OID} base\n{OID} HEAD\n\n".encode(), "the bundle has prerequisites"),
        (f"# v3 git bundle\n@filter=blob:none\n{OID} HEAD\n\n".encode(), "a bundle with a filter"),
        (f"# v3 git bundle\n@x-unknown\n{OID} HEAD\n\n".encode(), "unknown capability"),
        (f"# v2 git bundle\n{OID} HEAD\n".encode(), "does not end"),
        (f"# v2 git bundle\n{OID} refs/heads/../../x\n\n".encode(), "not a ref name"),
        (b"# v2 git bundle\nzz HEAD\n\n", "not '<object id> <ref name>'"),
        (b"# v2 git bundle\n\n", "names no ref"),
        (f"# v2 git bundle\n{OID} refs/heads/\xe9\n\n".encode("latin-1"), "not ASCII"),
    ],
)
def test_the_header_is_read_in_python_before_git_sees_the_file(header, expected):
    with pytest.raises(BundleError, match=None) as error:
        read_header(header + b"PACK")
    assert expected in str(error.value)


def test_the_snapshot_is_head_or_the_only_ref():
    assert read_header(f"# v3 git bundle\n@object-format=sha1\n{OID} HEAD\n\n".encode()) == ("sha1", {"HEAD": OID})
    assert snapshot_ref({"refs/heads/main": OID}) == "refs/heads/main"
    with pytest.raises(BundleError, match="several refs and no HEAD"):
        snapshot_ref({"refs/heads/a": OID, "refs/heads/b": OID})


def test_a_real_bundle_gives_the_same_snapshot_as_its_files(tmp_path):
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@example.org", "-C", str(folder)]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "bundle", "create", "-q", str(tmp_path / "x.bundle"), "HEAD"], check=True)
    data = bundles.snapshot_from_bundle((tmp_path / "x.bundle").read_bytes(), filename="x.bundle")
    assert data == snapshots.build_from_files({"calc.py": b"def add(a, b):\n    return a + b\n"})


def test_the_sandbox_that_reads_bundles_holds_no_repository_of_the_server(tmp_path):
    """Past the header check, git could only read what the sandbox holds: not the server's repositories."""
    folder = tmp_path / "server-repository"
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    assert subprocess.run(["git", "ls-remote", str(folder)], capture_output=True).returncode == 0  # the probe works
    sandbox = sandbox_for(SandboxView.of())
    if sandbox.isolation()["mode"] != "namespaces":
        pytest.skip("the sandbox runs without namespaces here: git cannot run in it at all")
    program = (
        "import os, subprocess, sys\n"
        f"path = {str(folder)!r}\n"
        "done = subprocess.run(['git', 'ls-remote', path], capture_output=True)\n"
        "print(os.path.exists(path), done.returncode)\n"
    )
    run = sandbox.run_script(program=program, stdin="", limits=SandboxLimits(max_processes=8))
    assert run.status == "exited", run.stderr
    assert run.stdout.split() == ["False", "128"]  # git is there and runs; the repository is not
