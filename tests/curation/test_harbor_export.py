"""Repository tasks exported as Harbor task folders: the layout, and the exported verifier itself run on
the exported repository, with and without the exported reference solution; the folders imported back."""

import io
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from curation.models import Task
from curation.services import environment_create
from engine.repo_tasks.patches import extract_patch
from tests.curation.test_repo_tasks import tiny_task
from tests.engine.repo_tasks.tiny_repo import FILES, HIDDEN_TESTS
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def verify(folder: Path, tmp_path: Path, *, solve: bool) -> str:
    testbed, logs = tmp_path / f"testbed-{solve}", tmp_path / f"logs-{solve}"
    shutil.copytree(folder / "environment" / "repo", testbed)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TESTBED": str(testbed), "LOGS": str(logs)}
    if solve:
        subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, capture_output=True)
    subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, timeout=120)
    return (logs / "reward.txt").read_text().strip()


def test_a_repository_task_exports_as_a_harbor_folder_whose_verifier_pays_only_the_fix(tmp_path, alice, media):
    environment = environment_create(name="repositories", domain="code")
    import_tasks(environment, alice, tiny_task(FILES))
    call_command("export_harbor", environment="repositories", out=str(tmp_path / "harbor"))
    folder = tmp_path / "harbor" / "calc-clamp"
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["version"] == "1.0" and config["metadata"]["passband_verifier"] == "repo_tests"
    assert "clamp() ignores its upper bound" in (folder / "instruction.md").read_text()
    assert (folder / "environment" / "Dockerfile").read_text().startswith("FROM python:3.11-slim")
    assert (folder / "environment" / "repo" / "calc" / "ops.py").read_text() == FILES["calc/ops.py"]
    assert (folder / "tests" / "hidden" / "tests" / "test_ops.py").read_text() == HIDDEN_TESTS
    assert os.access(folder / "tests" / "test.sh", os.X_OK)
    assert verify(folder, tmp_path, solve=True) == "1"
    assert verify(folder, tmp_path, solve=False) == "0"


def test_exported_harbor_folders_import_back_as_the_same_task(tmp_path, alice, media):
    environment = environment_create(name="repositories", domain="code")
    import_tasks(environment, alice, tiny_task(FILES))
    call_command("export_harbor", environment="repositories", out=str(tmp_path / "harbor"))
    alice.is_superuser = True
    alice.save()
    out = io.StringIO()
    call_command("import_harbor", str(tmp_path / "harbor"), environment="from-harbor", create=True, stdout=out)
    assert "1 new task(s)" in out.getvalue() and "0 audit failure(s)" in out.getvalue()
    original = environment.tasks.get().versions.get()
    imported = Task.objects.get(environment__name="from-harbor").versions.get()
    assert imported.task.key == "calc-clamp" and imported.prompt == original.prompt
    assert extract_patch(imported.answer) == extract_patch(original.answer)
    # The same repository (one snapshot, the same digest), the same tests, the same limits.
    assert imported.verifier == original.verifier | {"memory_mb": 2048}


def test_a_harbor_folder_that_is_not_a_repository_task_is_refused_naming_file_and_field(tmp_path, alice, media):
    environment = environment_create(name="repositories", domain="code")
    import_tasks(environment, alice, tiny_task(FILES))
    call_command("export_harbor", environment="repositories", out=str(tmp_path / "harbor"))
    (tmp_path / "harbor" / "calc-clamp" / "tests" / "tests.json").write_text('{"fail_to_pass": "x"}')
    with pytest.raises(CommandError, match="nothing imported"):
        call_command(
            "import_harbor",
            str(tmp_path / "harbor"),
            environment="repositories",
            owner="alice",
            stderr=(err := io.StringIO()),
        )
    assert "calc-clamp: tests/tests.json, field 'fail_to_pass': must be a list of pytest node ids" in err.getvalue()
    assert Task.objects.count() == 1
