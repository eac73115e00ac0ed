"""The text-answer battery (tests/engine/verifiers/data/text_answers.json) gets its expected verdict on
every scoring path: the probe (calibration's rollout scoring), POST /api/v1/verify (by task, and inline
with and without the prompt), release row scoring in every export format, the shipped TRL reward
function, the OpenEnv server and the NeMo Gym resources server. Each path scores the whole battery once;
vf-eval and Harbor are covered for the same verifier code by test_one_verdict.py and the Harbor tests."""

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from accounts.services import api_token_create
from calibration.models import Campaign, ProbeModel, Rollout
from calibration.services import rollouts_verify
from curation.models import Task, TaskStatus
from engine.integrations.release import read_release, score
from engine.packing import pack_logprobs, pack_tokens
from releases import services as releases
from tests.engine.integrations.conftest import serve_app
from tests.engine.integrations.test_nemo_gym import response_saying
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parents[1] / "verifiers" / "data" / "text_answers.json"
BATTERY = json.loads(DATA.read_text())["completions"]
WITH_PROMPT = [row for row in BATTERY if row["prompt"] is not None]


def _task_key(row: dict) -> str:
    """One task per question and verifier config in the battery."""
    return f"{row['task']}-{row['verifier']['kind']}-{row['verifier'].get('units', 'strict')}"


TASKS = {_task_key(row): row for row in WITH_PROMPT}
EXPECTED = [1.0 if row["verdict"] == "pass" else 0.0 for row in WITH_PROMPT]
CORPUS = [(_task_key(row), row["completion"]) for row in WITH_PROMPT]


@pytest.fixture
def released(settings, tmp_path, arithmetic, alice, django_capture_on_commit_callbacks):
    """The battery's tasks, approved, and the folder of a release of them (every format)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    tasks = [math_task(key, row["prompt"], row["answer"], verifier=row["verifier"]) for key, row in TASKS.items()]
    import_tasks(arithmetic, alice, *tasks)
    Task.objects.filter(environment=arithmetic).update(status=TaskStatus.APPROVED)
    model = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    with django_capture_on_commit_callbacks(execute=False):
        release = releases.release_create(user=alice, probe_model=model, environment=arithmetic, band="")
    release = releases.release_build(release_id=release.pk)
    assert release.status == "ready", release.status
    return releases.release_directory(release=release)


def test_the_probe(released, arithmetic, alice):
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
    assert [rewards[index] for index in range(len(CORPUS))] == EXPECTED


def test_the_verify_api(client, charlie, released):
    token = api_token_create(user=charlie, name="grader", scopes=["verify"])[1]

    def reward(body):
        response = client.post(
            "/api/v1/verify", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        return response.json()["reward"]

    assert [reward({"task": key, "completion": text}) for key, text in CORPUS] == EXPECTED
    inline = [
        reward({key: row[key] for key in ("verifier", "answer", "prompt", "completion") if row[key] is not None})
        for row in BATTERY
    ]
    assert inline == [1.0 if row["verdict"] == "pass" else 0.0 for row in BATTERY]


@pytest.mark.parametrize("file", ["native.jsonl", "trl.parquet", "verifiers.jsonl", "nemo_gym.parquet"])
def test_release_row_scoring_in_every_format(released, file):
    tasks = {task.task_key: task for task in read_release(released / file)}
    assert [score(tasks[key], completion=text).reward for key, text in CORPUS] == EXPECTED


def test_the_trl_reward_function(released):
    from engine.integrations.trl_reward import passband_reward

    rows = {row["task_key"]: row for row in map(json.loads, (released / "trl.jsonl").read_text().splitlines())}
    batch = [rows[key] for key, _ in CORPUS]
    rewards = passband_reward(
        prompts=[row["prompt"] for row in batch],
        completions=[[{"role": "assistant", "content": text}] for _, text in CORPUS],
        answer=[row["answer"] for row in batch],
        verifier=[row["verifier"] for row in batch],
        task_key=[row["task_key"] for row in batch],
    )
    assert rewards == EXPECTED
    # Without the prompt (a dataset that has none), the verdicts are the same.
    assert passband_reward(
        prompts=[None] * len(BATTERY),
        completions=[row["completion"] for row in BATTERY],
        answer=[row["answer"] for row in BATTERY],
        verifier=[json.dumps(row["verifier"]) for row in BATTERY],
    ) == [1.0 if row["verdict"] == "pass" else 0.0 for row in BATTERY]


def test_the_openenv_server(released):
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
        assert asyncio.run(episodes(base_url)) == EXPECTED


def test_the_nemo_gym_resources_server(released):
    pytest.importorskip("fastapi")
    from engine.integrations.nemo_gym import create_resources_app, load_rows

    rows = {row["task_key"]: row for row in load_rows(released / "nemo_gym.jsonl")}
    with serve_app(create_resources_app()) as base_url, httpx.Client(base_url=base_url) as client:
        rewards = [
            client.post("/verify", json=rows[key] | {"response": response_saying(text)}).json()["reward"]
            for key, text in CORPUS
        ]
    assert rewards == EXPECTED
