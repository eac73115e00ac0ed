"""Repository tasks at import: snapshots stored once by hash through Django's storage, the demo
set's audits, and snapshots whose tests cannot run here refused with the failing output."""

import pytest
from django.core.files.storage import default_storage

from curation import repo_demo
from curation.imports import ImportRejected
from curation.repo_snapshots import snapshot_path, snapshot_store
from curation.services import environment_create
from engine.repo_tasks import snapshots
from engine.repo_tasks.patches import diff_files
from tests.engine.repo_tasks.tiny_repo import FILES, tiny_row
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def repositories(db, media):
    return environment_create(name="repositories", domain="code")


def tiny_task(files, **options):
    info = snapshot_store(data=snapshots.build_from_files({path: text.encode() for path, text in files.items()}))
    return tiny_row(info.digest, **options)


def test_a_snapshot_is_stored_once_by_its_content_hash(media):
    data = snapshots.build_from_files({"a.py": b"x = 1\n"})
    first = snapshot_store(data=data)
    second = snapshot_store(data=data)
    assert first.digest == second.digest == snapshots.digest_of(data)
    assert default_storage.exists(snapshot_path(first.digest))
    assert len(list((media / "repo-snapshots").iterdir())) == 1
    assert snapshots.load(first.digest) == data  # the engine reads it back through the storage


def test_a_damaged_snapshot_is_refused_naming_the_member(media):
    with pytest.raises(snapshots.SnapshotError, match=r"\.git is not part of a snapshot"):
        snapshot_store(data=_with_git())
    assert not (media / "repo-snapshots").exists()


def _with_git():
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(".git/HEAD")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    return buffer.getvalue()


def test_a_repository_task_imports_and_passes_its_audits(repositories, alice):
    report = import_tasks(repositories, alice, tiny_task(FILES), run_audits=True)
    assert report.ok and report.created == ["calc-clamp"]
    assert report.audit_failures == [] and report.gameable == []


def test_a_reference_patch_that_fixes_nothing_fails_the_audit_naming_the_test(repositories, alice):
    report = import_tasks(
        repositories,
        alice,
        tiny_task(FILES, answer="```diff\n" + diff_files(FILES, {**FILES, "README.md": "x\n"}) + "```"),
        run_audits=True,
    )
    [failure] = report.audit_failures
    assert (
        "with the reference patch: FAIL_TO_PASS test tests/test_ops.py::test_clamp_high does not pass (failed)"
        in failure
    )
    # The test's own output: its line, and the values the grader's strict comparison saw.
    assert "clamp(5, 0, 3) == 3" in failure and "__passband_eq__(5, 3)" in failure


def test_a_snapshot_whose_tests_need_a_missing_package_fails_its_audit_with_the_output(repositories, alice):
    files = {**FILES, "tests/test_more.py": "import passband_no_such_package\n\n\ndef test_add_negative():\n    pass\n"}
    report = import_tasks(repositories, alice, tiny_task(files), run_audits=True)
    [failure] = report.audit_failures
    assert "PASS_TO_PASS test tests/test_more.py::test_add_negative does not pass" in failure
    assert "ModuleNotFoundError: No module named 'passband_no_such_package'" in failure


def test_a_snapshot_whose_tests_need_the_network_fails_its_audit_with_the_output(repositories, alice):
    network_test = (
        "import urllib.request\n\n\ndef test_add_negative():\n"
        "    urllib.request.urlopen('http://127.0.0.1:9/', timeout=5)\n"
    )
    report = import_tasks(
        repositories, alice, tiny_task({**FILES, "tests/test_more.py": network_test}), run_audits=True
    )
    [failure] = report.audit_failures
    assert "PASS_TO_PASS test tests/test_more.py::test_add_negative does not pass (failed)" in failure
    assert "URLError" in failure


def test_a_bad_snapshot_digest_is_refused_naming_the_field(repositories, alice):
    task = tiny_task(FILES)
    task["verifier"]["snapshot"] = "md5:1234"
    with pytest.raises(ImportRejected) as rejected:
        import_tasks(repositories, alice, task)
    [problem] = rejected.value.report.problems
    assert problem.line == 1 and "snapshot" in problem.field + problem.reason


def test_the_demo_set_imports_and_a_sample_passes_its_audits(repositories, alice):
    rows = list(repo_demo.task_rows(store=snapshot_store))
    assert 20 <= len(rows) <= 50
    assert len({row["verifier"]["snapshot"] for row in rows}) == len(rows)  # one bug per snapshot
    # One task through the audits (its reference, the empty answer and the gameability battery in the sandbox);
    # every demo task's reference patch passes and the empty patch fails in tests/calibration/test_repo_campaigns.py.
    report = import_tasks(repositories, alice, rows[0], run_audits=True)
    assert report.audit_failures == [] and report.gameable == []
    report = import_tasks(repositories, alice, *rows[1:])
    assert len(report.created) == len(rows) - 1


def test_a_repository_task_may_only_declare_the_repository_worlds_tools(repositories, alice):
    task = tiny_task(FILES)
    task["tools"] = [{"type": "function", "function": {"name": "rm_rf", "parameters": {"type": "object"}}}]
    with pytest.raises(ImportRejected) as rejected:
        import_tasks(repositories, alice, task)
    [problem] = rejected.value.report.problems
    assert problem.field == "tools"
    assert problem.reason.startswith("tool 0 (rm_rf) is not a tool of the repository world, whose tools are list_files")
