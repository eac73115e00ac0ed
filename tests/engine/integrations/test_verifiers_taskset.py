"""verifiers v1: `vf-eval passband-release` evaluates a real release against an OpenAI-compatible server.

The run goes through verifiers' own entry point (the vf-eval main), its interception server and its
trace store; rewards come from PassbandTask's @reward, which is Passband's verifier.
"""

import json

import pytest

from tests.support.openai_server import OpenAITestServer

pytestmark = pytest.mark.django_db

vf = pytest.importorskip("verifiers.v1")


def respond(prompt_text, seed):
    """The fake model: right about 2 + 3, wrong about 91 * 17, "paris" to the capital question."""
    if "2 + 3" in prompt_text:
        return "2 + 3 = 5, so the answer is \\boxed{5}."
    if "91 * 17" in prompt_text:
        return "The answer is \\boxed{1500}."
    return "paris"


def test_vf_eval_scores_a_release_with_passband_verifiers(release_dir, tmp_path, monkeypatch):
    from verifiers.v1.cli.eval.main import main

    from engine.integrations.verifiers_taskset import PassbandTaskset, PassbandTasksetConfig

    # The taskset yields one task per row; its id is the task key and the version hash.
    taskset = PassbandTaskset(PassbandTasksetConfig(id="passband-release", release=release_dir / "verifiers.parquet"))
    tasks = {task.data.task_key: task for task in taskset}
    assert set(tasks) == {"sum", "product", "capital", "tool-add"}
    assert tasks["sum"].key == tasks["sum"].data.id == f"sum@{tasks['sum'].data.version_hash}"

    monkeypatch.setenv("PASSBAND_TEST_KEY", "test")
    with OpenAITestServer(respond=respond) as server:
        main(
            [
                "passband-release",
                "--env.taskset.release",
                str(release_dir / "verifiers.jsonl"),
                "--select.include.names",
                "sum",
                "product",
                "capital",
                "-m",
                "fake-model",
                "--client.base-url",
                server.base_url,
                "--client.api-key-var",
                "PASSBAND_TEST_KEY",
                "-r",
                "2",
                "--no-push",
                "--no-rich",
                "-o",
                str(tmp_path / "outputs"),
                "--run.name",
                "release",
            ]
        )
    assert [request.path for request in server.requests] == ["/v1/chat/completions"] * 6
    assert all(request.body["model"] == "fake-model" for request in server.requests)

    episodes = [
        json.loads(line) for line in (tmp_path / "outputs" / "release" / "traces.jsonl").read_text().splitlines()
    ]
    scored = sorted(
        (
            trace["task"]["key"].split("@")[0],
            trace["rewards"]["passband"]["score"],
            trace["info"]["passband"]["outcome"],
        )
        for episode in episodes
        for trace in episode["traces"]
    )
    assert scored == [("capital", 1.0, "pass")] * 2 + [("product", 0.0, "fail")] * 2 + [("sum", 1.0, "pass")] * 2
    assert all(episode["ok"] and episode["task"]["key"] == episode["task"]["data"]["id"] for episode in episodes)
