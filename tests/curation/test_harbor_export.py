"""Repository tasks exported as Harbor task folders: the layout, and the exported verifier itself run on
the exported repository, with and without the exported reference solution."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.core.management import call_command

from curation.services import environment_create
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
