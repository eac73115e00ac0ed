"""Harbor's own code on Passband's Harbor exports: its task model loads each exported folder (repository
and code tasks) and reads the instruction, config and tests, and its static checker (`harbor lint`) finds
nothing but the verifier sharing the agent's container, by design. harbor 0.25.0 needs Python >= 3.12, so it runs in its side environment
(scripts/side-env.sh) as a subprocess. Harbor runs a verifier only in a container (Docker or a cloud
sandbox): test_harbor_export.py runs the exported verifiers by hand instead."""

import json
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from curation.services import environment_create
from tests.curation.test_harbor_export import code_tasks
from tests.curation.test_repo_tasks import tiny_task
from tests.engine.repo_tasks.tiny_repo import FILES
from tests.factories import import_tasks
from tests.support.readme import readme_python, readme_shell_line
from tests.support.side_env import run_side_command, side_python

pytestmark = [pytest.mark.django_db, pytest.mark.side_env]

SIDE_SCRIPT = Path(__file__).with_name("harbor_side.py")


def test_harbors_task_model_and_linter_load_every_exported_folder(tmp_path, alice, media):
    python = side_python("harbor")
    environment = environment_create(name="mixed", domain="code")
    import_tasks(environment, alice, tiny_task(FILES), *code_tasks())
    call_command("export_harbor", environment="mixed", out=str(tmp_path / "harbor"))
    folders = sorted((tmp_path / "harbor").iterdir())
    assert [folder.name for folder in folders] == ["add", "calc-clamp", "has-close-elements", "sum-line"]
    run = subprocess.run(
        [python, str(SIDE_SCRIPT), *map(str, folders)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    for key, task in loaded.items():
        # The one finding of `harbor lint`'s default rules: the verifier runs in the agent's container, after
        # the agent (Harbor's `shared` mode, as in its terminal-bench tasks), where the agent's work is.
        assert task["valid"] and [rule for rule, *_ in task["findings"]] == ["shared-verifier"], (key, task)
        assert task["name"] == key and task["metadata"]["passband_key"] == key
        assert (task["test_script"], task["solve_script"]) == ("tests/test.sh", "solution/solve.sh")
        assert task["instruction"] == (tmp_path / "harbor" / key / "instruction.md").read_text()
    assert loaded["calc-clamp"]["metadata"]["passband_verifier"] == "repo_tests"
    assert "clamp() ignores its upper bound" in loaded["calc-clamp"]["instruction"]
    assert loaded["has-close-elements"]["metadata"]["passband_style"] == "humaneval"
    assert loaded["sum-line"]["verifier_timeout"] == 2 * 2 + 60  # two cases of 2 s, and the margin
    assert loaded["add"]["memory_mb"] == 1024

    # docs/trainers.md's example in Harbor's Python, and its `harbor lint` line, run where the export is.
    example = subprocess.run(
        [python, "-c", readme_python('Task("harbor/')], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert example.returncode == 0, example.stderr[-3000:]
    assert example.stdout.split() == ["has-close-elements", "code", "70.0"]
    line = readme_shell_line("harbor lint")
    lint = run_side_command(python, line, cwd=tmp_path, timeout=120)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
