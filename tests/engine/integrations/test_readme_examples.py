"""docs/trainers.md's examples for verifiers, OpenEnv and NeMo Gym rows, run as written on a release the
app built (in the folder the examples' file names assume; a served address where an example names one).
The TRL reward function runs in test_one_verdict.py, the traces example in test_campaign_traces.py, the
Hub's in test_hub_folder.py, the NeMo Gym folder's in test_nemo_gym_folder.py, Harbor's in
test_harbor_own_code.py."""

import shutil

import pytest

from tests.engine.integrations.conftest import serve_app
from tests.support.readme import run_readme_python

pytestmark = pytest.mark.django_db


def in_readme_folder(release_dir, tmp_path, monkeypatch, format: str, file_type: str) -> None:
    shutil.copyfile(release_dir / f"{format}.{file_type}", tmp_path / f"release-1-{format}.{file_type}")
    monkeypatch.chdir(tmp_path)


def test_the_verifiers_example_takes_tasks_from_the_release(release_dir, tmp_path, monkeypatch, capsys):
    in_readme_folder(release_dir, tmp_path, monkeypatch, "verifiers", "parquet")
    run_readme_python("PassbandTaskset(")
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2
    assert all(line.split("@")[0] in {"sum", "product", "capital", "tool-add"} for line in printed)
    assert any(line.endswith("What is 2 + 3?") or line.endswith("What is 91 * 17?") for line in printed)


def test_the_openenv_example_scores_a_reply_through_the_served_release(release_dir, capsys):
    from engine.integrations.openenv_env import create_passband_app

    with serve_app(create_passband_app(release_dir / "native.parquet")) as base_url:
        run_readme_python("PassbandEnvClient(", address=("http://127.0.0.1:8002", base_url))
    reward, outcome, detail = capsys.readouterr().out.strip().split(" ", 2)
    assert (reward, outcome) == ("0.0", "fail") and detail  # "42" answers none of the four tasks


def test_the_nemo_gym_rows_example_checks_and_scores_the_export(release_dir, tmp_path, monkeypatch, capsys):
    in_readme_folder(release_dir, tmp_path, monkeypatch, "nemo_gym", "jsonl")
    namespace = run_readme_python("verify_request(rows[0]")
    assert len(namespace["rows"]) == 4
    assert capsys.readouterr().out.strip() == "0.0"
