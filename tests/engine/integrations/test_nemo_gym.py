"""NeMo Gym: a real release's nemo_gym export checked against the Responses API request schema, loaded by
verifiers' NeMo Gym taskset, and scored over NeMo Gym's resources-server protocol (/seed_session, /verify).

The nemo-gym package itself needs Python >= 3.12 (Passband runs on 3.11), so these checks use the SDK type
NeMo Gym copies for its schema and the loader verifiers ships for NeMo Gym datasets.
"""

import json

import httpx
import pytest

from tests.engine.integrations.conftest import serve_app
from tests.engine.integrations.responses import response_saying

pytestmark = pytest.mark.django_db

pytest.importorskip("fastapi")
vf = pytest.importorskip("verifiers.v1")


def test_nemo_gym_export_loads_checks_and_scores(release_dir, tmp_path):
    from verifiers.v1.tasksets.nemo_gym import NeMoGymConfig, NeMoGymTaskset

    from engine.integrations.nemo_gym import create_resources_app, load_rows
    from engine.integrations.release import ReleaseFileError

    rows = load_rows(release_dir / "nemo_gym.jsonl")
    assert [row["task_key"] for row in rows] == [row["task_key"] for row in load_rows(release_dir / "nemo_gym.parquet")]
    by_key = {row["task_key"]: row for row in rows}
    assert by_key["tool-add"]["responses_create_params"]["tools"][0]["name"] == "add"

    # Chat Completions tool schemas (what the export wrote before) are not Responses API tools.
    bad = dict(
        by_key["tool-add"],
        responses_create_params={
            "input": by_key["tool-add"]["responses_create_params"]["input"],
            "tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}],
        },
    )
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(ReleaseFileError, match="row 1: responses_create_params"):
        load_rows(tmp_path / "bad.jsonl")

    # verifiers' NeMo Gym taskset reads the export with its own loader (Responses request parsing included).
    tasks = list(NeMoGymTaskset(NeMoGymConfig(id="nemo-gym", dataset=release_dir / "nemo_gym.jsonl")))
    assert [task.data.row["task_key"] for task in tasks] == [row["task_key"] for row in rows]
    product = next(task for task in tasks if task.data.row["task_key"] == "product")
    assert product.data.prompt_text.endswith("What is 91 * 17?")

    with serve_app(create_resources_app()) as base_url, httpx.Client(base_url=base_url) as client:
        assert client.post("/seed_session", json=product.data.row).status_code == 200
        verdicts = [
            client.post("/verify", json=product.data.row | {"response": response_saying(text)}).json()
            for text in ("So 91 * 17 = \\boxed{1547}.", "\\boxed{1548}")
        ]
        refused = client.post("/seed_session", json=bad)
    assert [(v["reward"], v["outcome"], v["mask_sample"]) for v in verdicts] == [
        (1.0, "pass", False),
        (0.0, "fail", False),
    ]
    assert all(v["task_key"] == "product" and "responses_create_params" in v and "response" in v for v in verdicts)
    assert refused.status_code == 422 and "responses_create_params" in refused.json()["detail"]
