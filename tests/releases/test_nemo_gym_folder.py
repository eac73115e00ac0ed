"""A release built by a real Celery worker, written as a NeMo Gym 0.4 environment folder: NeMo Gym's own
config parser and `ng_prepare_data` read it, and its resources server, started as `ng_run` starts one,
scores replies through Passband's scorer. NeMo Gym needs Python 3.12, so that part runs in its side
environment (scripts/side-env.sh) as a subprocess."""

import io
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from releases import services as releases
from tests.engine.integrations.conftest import serve_app
from tests.releases.export_data import calibrated_environment, release_built_by_worker
from tests.support.readme import readme_shell_line
from tests.support.side_env import run_side_command, side_python

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

SIDE_SCRIPT = Path(__file__).parents[1] / "engine" / "integrations" / "nemo_gym_folder_side.py"


@pytest.fixture
def release(arithmetic, alice, charlie, settings, tmp_path):
    """All four tasks of calibrated_environment (every band, the tool task too), built by a worker."""
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    return release_built_by_worker(arithmetic, alice, charlie, var_dir=tmp_path / "var", band="")


def nemo_gym_folder(release, folder, *options) -> str:
    err = io.StringIO()
    call_command("release_nemo_gym_folder", release.pk, "-o", str(folder), *options, stderr=err)
    return err.getvalue()


def test_the_folder_holds_the_config_and_the_release_rows(release, tmp_path):
    folder = tmp_path / "gym"
    out = nemo_gym_folder(release, folder, "--passband-url", "http://scorer:9000", "--license", "MIT")
    name = f"passband_release_{release.pk}"
    assert f"resources_servers/{name}/configs/{name}.yaml" in out
    server = folder / "resources_servers" / name
    config = yaml.safe_load((server / "configs" / f"{name}.yaml").read_text())
    resources = config[name]["resources_servers"][name]
    assert resources["entrypoint"] == "app.py" and resources["domain"] == "math"
    assert resources["passband_url"] == "http://scorer:9000"
    agent = config[f"{name}_simple_agent"]["responses_api_agents"]["simple_agent"]
    assert agent["resources_server"] == {"type": "resources_servers", "name": name}
    assert [(d["name"], d["type"], d.get("license")) for d in agent["datasets"]] == [
        ("train", "train", "MIT"),
        ("example", "example", None),
    ]
    built = releases.release_file_path(release=release, format="nemo_gym", file_type="jsonl").read_text()
    assert (server / "data" / "train.jsonl").read_text() == built
    assert {json.loads(line)["task_key"] for line in built.splitlines()} == {"sum", "product", "capital", "tool-add"}
    assert (server / "data" / "example.jsonl").read_text() == built  # four rows: all of them are examples
    assert (server / "requirements.txt").read_text() == "nemo-gym==0.4.0\n"
    assert json.loads((folder / "manifest.json").read_text()) == release.manifest
    with pytest.raises(CommandError, match="not empty"):
        nemo_gym_folder(release, folder)


def test_a_release_that_is_not_ready_is_refused(arithmetic, alice, charlie, tmp_path):
    model = calibrated_environment(arithmetic, alice)
    pending = releases.release_create(user=charlie, probe_model=model, environment=arithmetic)
    with pytest.raises(CommandError, match="not ready"):
        nemo_gym_folder(pending, tmp_path / "gym")
    assert not (tmp_path / "gym").exists()


@pytest.mark.side_env
def test_nemo_gyms_parser_data_preparation_and_client_run_the_folder(release, tmp_path):
    from engine.integrations.nemo_gym import create_resources_app

    python = side_python("nemo-gym")
    name = f"passband_release_{release.pk}"
    answers = [
        ("product", "So 91 * 17 = \\boxed{1547}."),
        ("product", "\\boxed{1548}"),
        ("sum", "5"),
        ("tool-add", "4"),  # its row carries the tool, as a Responses API function tool
        ("capital", "Lyon"),
    ]
    with serve_app(create_resources_app()) as scorer_url:
        folder = tmp_path / "gym"
        nemo_gym_folder(release, folder, "--passband-url", scorer_url)
        run = subprocess.run(
            [python, str(SIDE_SCRIPT)],
            input=json.dumps({"server": name, "answers": answers}),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=folder,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["servers"] == {
        name: "resources_servers",
        f"{name}_simple_agent": "responses_api_agents",
        "policy_model": "responses_api_models",
    }
    assert result["datasets"]["train"] == {
        "type": "train",
        "jsonl_fpath": f"resources_servers/{name}/data/train.jsonl",
        "license": "TBD",
    }
    assert result["offending"] == []
    # ng_prepare_data collated every row, each pointing at the folder's agent.
    assert sorted(row["task_key"] for row in result["prepared"]) == ["capital", "product", "sum", "tool-add"]
    assert {row["agent_ref"]["name"] for row in result["prepared"]} == {f"{name}_simple_agent"}
    assert [(v["task_key"], v["reward"], v["outcome"]) for v in result["verdicts"]] == [
        ("product", 1.0, "pass"),
        ("product", 0.0, "fail"),
        ("sum", 1.0, "pass"),
        ("tool-add", 1.0, "pass"),
        ("capital", 0.0, "fail"),
    ]

    # docs/trainers.md's `ng_prepare_data` line, NeMo Gym's own command, run in the folder as written.
    line = readme_shell_line('ng_prepare_data "+config_paths=[resources_servers/passband_release_1').replace(
        "passband_release_1", name
    )
    prepared = run_side_command(python, line, cwd=folder)
    assert prepared.returncode == 0, prepared.stdout[-3000:] + prepared.stderr[-3000:]
    rows = [json.loads(row) for row in (folder / "data" / "prepared" / "train.jsonl").read_text().splitlines()]
    assert sorted(row["task_key"] for row in rows) == ["capital", "product", "sum", "tool-add"]
