"""NeMo Gym's own code on a real release: its data loader reads the `nemo_gym` export and its client scores
replies through Passband's resources server. nemo-gym 0.4.0 needs Python >= 3.12, so it runs in its side
environment (scripts/side-env.sh, built once and cached outside the clone) as a subprocess.

Marked `side_env`: building that environment takes about 6.5 minutes the first time, so `make test` does
not run these yet; `pytest -m side_env` does."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.integrations.conftest import serve_app
from tests.support.side_env import side_python

pytestmark = [pytest.mark.django_db, pytest.mark.side_env]

SIDE_SCRIPT = Path(__file__).with_name("nemo_gym_side.py")


@pytest.fixture(scope="session")
def nemo_gym_python() -> str:
    return side_python("nemo-gym")


def test_nemo_gyms_loader_and_client_take_the_export_and_the_resources_server(release_dir, tmp_path, nemo_gym_python):
    from engine.integrations.nemo_gym import create_resources_app

    answers = [("product", "So 91 * 17 = \\boxed{1547}."), ("product", "\\boxed{1548}"), ("sum", "5")]
    with serve_app(create_resources_app()) as base_url:
        run = subprocess.run(
            [nemo_gym_python, str(SIDE_SCRIPT)],
            input=json.dumps(
                {"export": str(release_dir / "nemo_gym.jsonl"), "resources_url": base_url, "answers": answers}
            ),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["offending"] == []
    assert set(result["tools"]) == {"sum", "product", "capital", "tool-add"} and result["tools"]["tool-add"] == 1
    assert [(verdict["task_key"], verdict["reward"]) for verdict in result["verdicts"]] == [
        ("product", 1.0),
        ("product", 0.0),
        ("sum", 1.0),
    ]
    assert sys.version_info[:2] == (3, 11)  # Passband's side of the conversation stays on its own Python
