"""One verdict on every path: a completion is paid the same wherever it is scored.

A hostile corpus (answers that restate the question, hedges) and a legitimate one go through the
probe (calibration's rollout scoring), POST /api/v1/verify, release row scoring (every export
format), the TRL reward function in the README and the shipped one, the verifiers taskset (through
vf-eval), the OpenEnv server and the NeMo Gym resources server. Each path must give the probe's
reward for every completion; the probe refuses every hostile completion and pays every legitimate one.
"""

import asyncio
import itertools
import json
import re
import threading
from pathlib import Path

import httpx
import pytest

from accounts.services import api_token_create
from calibration.models import Campaign, ProbeModel, Rollout
from calibration.services import rollouts_verify
from curation.models import Task, TaskStatus
from engine.integrations.release import read_release, score
from engine.packing import pack_logprobs, pack_tokens
from engine.verifiers import verify
from releases import services as releases
from tests.engine.integrations.conftest import serve_app
from tests.engine.integrations.test_nemo_gym import response_saying
from tests.factories import import_tasks, math_task
from tests.support.openai_server import OpenAITestServer

pytestmark = pytest.mark.django_db

README = Path(__file__).parents[3] / "README.md"
QUESTIONS = {"add": ("What is 17 + 25?", "42"), "eight": ("What is 2 + 6?", "8")}
HOSTILE = {
    "add": [
        "17 + 25",
        "The answer is \\boxed{17 + 25}.",
        "$x = 17 + 25$",
        "\\boxed{41 \\lor 42}",
        "\\boxed{41, 42}",
        "\\boxed{1 \\le x \\le 100}",
    ],
    "eight": ["I do not know what 2 + 6 is.", "2 + 6", "\\boxed{10 = 2 + 6}"],
}
LEGITIMATE = {
    "add": ["17 + 25 = 42", "The answer is \\boxed{42}.", "$x = 42$", "17 + 25 = 42, so $\\boxed{42}$"],
    "eight": ["2 + 6 = 8", "\\boxed{8}", "So $2 + 6 = 8$."],
}
CORPUS = [(key, text) for corpus in (HOSTILE, LEGITIMATE) for key, texts in corpus.items() for text in texts]


@pytest.fixture
def released(settings, tmp_path, arithmetic, alice, django_capture_on_commit_callbacks):
    """The two tasks, approved, and the folder of a release of them (every format, JSONL and Parquet)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    import_tasks(
        arithmetic, alice, *(math_task(key, question, answer) for key, (question, answer) in QUESTIONS.items())
    )
    Task.objects.filter(environment=arithmetic).update(status=TaskStatus.APPROVED)
    model = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    with django_capture_on_commit_callbacks(execute=False):
        release = releases.release_create(user=alice, probe_model=model, environment=arithmetic, band="")
    release = releases.release_build(release_id=release.pk)
    assert release.status == "ready", release.status
    return releases.release_directory(release=release)


@pytest.fixture
def probe_rewards(released, arithmetic, alice):
    """The rewards calibration gave the corpus: rollouts of a campaign, scored by rollouts_verify."""
    model = ProbeModel.objects.get(name="probe")
    campaign = Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)
    for index, (key, text) in enumerate(CORPUS):
        Rollout.objects.create(
            campaign=campaign,
            task_version=arithmetic.tasks.get(key=key).current_version,
            probe_model=model,
            sample_index=index,
            seed=index,
            prompt_token_ids=pack_tokens([1]),
            completion_token_ids=pack_tokens([2]),
            logprobs=pack_logprobs([-0.5]),
            text=text,
        )
    version_ids = list(arithmetic.tasks.values_list("current_version", flat=True))
    assert rollouts_verify(campaign_id=campaign.pk, task_version_ids=version_ids) == len(CORPUS)
    rewards = dict(Rollout.objects.filter(campaign=campaign).values_list("sample_index", "reward"))
    return [rewards[index] for index in range(len(CORPUS))]


def test_the_probe_refuses_the_hostile_corpus_and_pays_the_legitimate_one(probe_rewards):
    hostile = sum(len(texts) for texts in HOSTILE.values())
    assert probe_rewards == [0.0] * hostile + [1.0] * (len(CORPUS) - hostile)


def test_the_verify_api(client, charlie, probe_rewards):
    token = api_token_create(user=charlie, name="grader", scopes=["verify"])[1]

    def reward(key, text):
        body = {"task": key, "completion": text}
        response = client.post(
            "/api/v1/verify", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        return response.json()["reward"]

    assert [reward(key, text) for key, text in CORPUS] == probe_rewards
    # An inline verifier is given the prompt the same way.
    inline = {"verifier": {"kind": "math"}, "answer": "42", "prompt": "What is 17 + 25?", "completion": "17 + 25"}
    response = client.post(
        "/api/v1/verify", inline, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.json()["outcome"] == "fail"


@pytest.mark.parametrize("file", ["native.jsonl", "trl.parquet", "verifiers.jsonl", "nemo_gym.parquet"])
def test_release_row_scoring_in_every_format(released, probe_rewards, file):
    tasks = {task.task_key: task for task in read_release(released / file)}
    assert [score(tasks[key], completion=text).reward for key, text in CORPUS] == probe_rewards


def _readme_reward_function():
    """The README's TRL reward function, defined from its text (the trainer lines around it are not run)."""
    source = README.read_text()
    definition = re.search(r"^def passband_reward\(.*?(?=^\S)", source, re.MULTILINE | re.DOTALL)
    assert definition, "README.md has no TRL reward function"
    namespace = {"json": json, "verify": verify}
    exec(definition.group(0), namespace)  # noqa: S102 - the README's own snippet
    return namespace["passband_reward"]


@pytest.mark.parametrize("source", ["README", "engine.integrations.trl_reward"])
def test_the_trl_reward_function(released, probe_rewards, source):
    from engine.integrations.trl_reward import passband_reward

    function = _readme_reward_function() if source == "README" else passband_reward
    rows = {row["task_key"]: row for row in map(json.loads, (released / "trl.jsonl").read_text().splitlines())}
    # As GRPOTrainer calls it for a conversational dataset: prompts, completions as messages, columns.
    batch = [rows[key] for key, _ in CORPUS]
    rewards = function(
        prompts=[row["prompt"] for row in batch],
        completions=[[{"role": "assistant", "content": text}] for _, text in CORPUS],
        completion_ids=[[1] for _ in CORPUS],
        answer=[row["answer"] for row in batch],
        verifier=[row["verifier"] for row in batch],
        task_key=[row["task_key"] for row in batch],
        trainer_state=None,
    )
    assert rewards == probe_rewards


def test_the_openenv_server(released, probe_rewards):
    pytest.importorskip("openenv.core")
    from engine.integrations.openenv_env import PassbandAction, PassbandEnvClient, create_passband_app

    async def episodes(base_url):
        rewards = []
        async with PassbandEnvClient(base_url=base_url) as env:
            for key, text in CORPUS:
                await env.reset(task_id=key)
                rewards.append((await env.step(PassbandAction(completion=text))).reward)
        return rewards

    with serve_app(create_passband_app(released / "native.parquet")) as base_url:
        assert asyncio.run(episodes(base_url)) == probe_rewards


def test_the_nemo_gym_resources_server(released, probe_rewards):
    pytest.importorskip("fastapi")
    from engine.integrations.nemo_gym import create_resources_app, load_rows

    rows = {row["task_key"]: row for row in load_rows(released / "nemo_gym.jsonl")}
    with serve_app(create_resources_app()) as base_url, httpx.Client(base_url=base_url) as client:
        rewards = [
            client.post("/verify", json=rows[key] | {"response": response_saying(text)}).json()["reward"]
            for key, text in CORPUS
        ]
    assert rewards == probe_rewards


def test_the_verifiers_taskset_through_vf_eval(released, probe_rewards, tmp_path, monkeypatch):
    pytest.importorskip("verifiers.v1")
    from verifiers.v1.cli.eval.main import main

    replies: dict = {}  # task key -> the corpus replies, in turn
    lock = threading.Lock()

    def respond(prompt_text, seed):
        key = next(key for key, (question, _) in QUESTIONS.items() if question in prompt_text)
        with lock:
            return next(replies[key])

    expected = {(key, text): reward for (key, text), reward in zip(CORPUS, probe_rewards, strict=True)}
    scored = {}
    for corpus in (HOSTILE, LEGITIMATE):
        replies.update({key: itertools.cycle(texts) for key, texts in corpus.items()})
        for key, texts in corpus.items():
            output = tmp_path / f"outputs-{len(scored)}"
            monkeypatch.setenv("PASSBAND_TEST_KEY", "test")
            with OpenAITestServer(respond=respond) as server:
                main(
                    ["passband-release", "--env.taskset.release", str(released / "verifiers.jsonl")]
                    + ["--select.include.names", key, "-m", "fake-model", "--client.base-url", server.base_url]
                    + [
                        "--client.api-key-var",
                        "PASSBAND_TEST_KEY",
                        "-r",
                        str(len(texts)),
                        "--sampling.max-tokens",
                        "200",
                    ]
                    + ["--no-push", "--no-rich", "-o", str(output), "--run.name", "run"]
                )
            for line in (output / "run" / "traces.jsonl").read_text().splitlines():
                for trace in json.loads(line)["traces"]:
                    text = _reply_text(trace)
                    scored[(key, text)] = trace["rewards"]["passband"]["score"]
    assert scored == expected


def _reply_text(trace: dict) -> str:
    """The model's reply in a vf-eval trace (the last sampled message node)."""
    sampled = [node for node in trace["nodes"] if node.get("sampled")]
    content = sampled[-1]["message"]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
