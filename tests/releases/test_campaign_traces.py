"""Training traces of campaigns run by a real Celery worker with the real SmolLM2 (in process, on the CPU):
single-turn completions and a multi-turn tool episode, exported as JSONL, Parquet and ATIF, and checked
with the model's own tokenizer (transformers, from the model's GGUF file): each completion span decodes
to the text the model wrote, each prompt and observation span to what the chat template renders, and
the ids are the ones stored on the rollouts."""

import io
import json
import subprocess

import orjson
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.test import Client

from accounts.services import api_token_create
from calibration import services
from calibration.models import Campaign, Outcome, Rollout
from curation.models import Task, TaskStatus
from curation.services import environment_create
from engine.episodes import backoffice
from engine.packing import unpack_logprobs, unpack_tokens
from tests.factories import import_tasks
from tests.support.readme import run_readme_python
from tests.support.side_env import side_python
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.model, pytest.mark.workers]

CALL = '<tool_call>{"name": "get_record", "arguments": {"table": "deals", "id": 1}}</tool_call>'


@pytest.fixture(scope="module")
def tokenizer(smollm2_gguf_tokenizer):
    return smollm2_gguf_tokenizer


def repeat_the_call_task():
    """A tool task SmolLM2 answers with a real tool call (greedy, told to copy it), so it gets a second turn."""
    return {
        "key": "copy-call",
        "prompt": [{"role": "user", "content": f"Repeat this line exactly and write nothing else:\n{CALL}"}],
        "answer": json.dumps(
            [{"name": "update_record", "arguments": {"table": "deals", "id": 1, "fields": {"stage": "won"}}}]
        ),
        "verifier": {
            "kind": "state_check",
            "environment": "backoffice",
            "seed": 1,
            "checks": [{"table": "deals", "where": {"id": 1}, "expect": {"stage": "won"}}],
        },
        "tools": [
            tool for tool in backoffice.TOOL_SCHEMAS if tool["function"]["name"] in ("get_record", "update_record")
        ],
        "domain": "workflow",
    }


@pytest.fixture
def campaigns(arithmetic, alice, tmp_path):
    """Two campaigns of the same SmolLM2 probe model, run to the end by one real worker."""
    flush_broker()
    import_tasks(
        arithmetic,
        alice,
        {"key": "sum-1", "prompt": "What is 1 + 4? Answer with the number.", "answer": "5"},
        {"key": "sum-2", "prompt": "What is 2 + 7? Answer with the number.", "answer": "9"},
        # Longer than the model's context: a rollout with no token ids and no reward (never a trace).
        {"key": "too-long", "prompt": "Add these numbers: " + "1 + " * 9000 + "1", "answer": "9001"},
    )
    workflow = environment_create(name="backoffice", domain="workflow")
    report = import_tasks(workflow, alice, repeat_the_call_task(), run_audits=True)
    assert report.ok and not report.audit_failures
    model = services.probe_model_add(name="smollm2", backend="transformers", temperature=0.0, max_new_tokens=36)
    single = services.campaign_start(
        environment=arithmetic, probe_model=model, created_by=alice, rollouts=2, round_size=2, seed=1, max_new_tokens=8
    )
    episodes = services.campaign_start(
        environment=workflow, probe_model=model, created_by=alice, rollouts=1, round_size=1, seed=2
    )
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with running_worker(concurrency=1, extra_env=threads, log_path=tmp_path / "worker.log"):
        wait_for(
            lambda: Campaign.objects.filter(pk__in=[single.pk, episodes.pk], status=Campaign.Status.DONE).count() == 2,
            timeout=900,
            what="both campaigns to finish",
        )
    return single, episodes


def export(campaign, path, *options):
    err = io.StringIO()
    call_command("export_traces", campaign.pk, "-o", str(path), *options, stderr=err)
    return err.getvalue()


def jsonl(path):
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def spans_of(trace, kind):
    return [span for span in trace["spans"] if span["kind"] == kind]


def check_masks(trace):
    """The loss mask is 1 exactly on the model's spans; logprobs are 0.0 elsewhere; the spans tile the ids."""
    ids, mask, logprobs = trace["token_ids"], trace["loss_mask"], trace["logprobs"]
    assert len(ids) == len(mask) == len(logprobs)
    assert trace["spans"][0]["start"] == 0 and trace["spans"][-1]["end"] == len(ids)
    for before, after in zip(trace["spans"], trace["spans"][1:], strict=False):
        assert before["end"] == after["start"]
    for span in trace["spans"]:
        model = span["kind"] == "completion"
        assert set(mask[span["start"] : span["end"]]) <= {1 if model else 0}
        if not model:
            assert set(logprobs[span["start"] : span["end"]]) <= {0.0}


@pytest.mark.side_env
@pytest.mark.django_db(transaction=True)
def test_traces_rebuild_with_the_models_tokenizer_match_the_stored_ids_and_pass_harbors_validator(
    campaigns, tokenizer, tmp_path, charlie
):
    """One test for the two campaigns (the real model runs them once): the traces against the tokenizer and
    the stored ids, then Harbor's own validator on every ATIF trajectory."""
    single, episodes = campaigns

    # Single-turn: prompt ids then completion ids, exactly the rollout's stored arrays.
    out = export(single, tmp_path / "single.jsonl")
    rows = jsonl(tmp_path / "single.jsonl")
    assert "Wrote 4 traces" in out and len(rows) == 4
    stored = {rollout.pk: rollout for rollout in Rollout.objects.filter(campaign=single)}
    for trace in rows:
        rollout = stored[trace["rollout_id"]]
        prompt_ids, completion_ids = (
            unpack_tokens(rollout.prompt_token_ids),
            unpack_tokens(rollout.completion_token_ids),
        )
        assert trace["token_ids"] == prompt_ids + completion_ids
        (prompt,), (completion,) = spans_of(trace, "prompt"), spans_of(trace, "completion")
        rendered = tokenizer.apply_chat_template(
            rollout.task_version.prompt, add_generation_prompt=True, tokenize=False
        )
        assert tokenizer.decode(trace["token_ids"][prompt["start"] : prompt["end"]]) == rendered
        completion_ids = trace["token_ids"][completion["start"] : completion["end"]]
        assert tokenizer.decode(completion_ids, skip_special_tokens=True) == rollout.text
        assert trace["logprobs"][completion["start"] :] == pytest.approx(unpack_logprobs(rollout.logprobs))
        assert trace["logprob_source"] == rollout.logprob_source == "pre_sampling"
        assert trace["reward"] == rollout.reward is not None and trace["outcome"] == rollout.outcome
        assert trace["policy"]["name"] == "smollm2" and trace["policy"]["file"].endswith(".gguf")
        assert trace["policy"]["revision"]
        check_masks(trace)

    # The rollouts that cannot be trained on are left out, or kept and marked.
    too_long = Rollout.objects.filter(campaign=single, outcome=Outcome.PROMPT_TOO_LONG)
    assert too_long.count() == 2
    export(single, tmp_path / "all.jsonl", "--include-excluded")
    marked = {row["rollout_id"]: row for row in jsonl(tmp_path / "all.jsonl") if not row["trainable"]}
    assert set(marked) == set(too_long.values_list("pk", flat=True))
    assert all("text_only" in row["excluded"] and row["token_ids"] is None for row in marked.values())

    # Parquet holds the same rows (read by pyarrow, the consumer's reader).
    export(single, tmp_path / "single.parquet")
    table = pq.read_table(tmp_path / "single.parquet").to_pylist()
    assert [(row["rollout_id"], row["token_ids"], row["loss_mask"]) for row in table] == [
        (row["rollout_id"], row["token_ids"], row["loss_mask"]) for row in rows
    ]

    # The episode: first prompt, each turn's sampled ids, the environment's ids between them.
    export(episodes, tmp_path / "episodes.jsonl")
    (trace,) = jsonl(tmp_path / "episodes.jsonl")
    rollout = Rollout.objects.get(campaign=episodes)
    turns = rollout.episode["turns"]
    assert len(turns) >= 2 and trace["kind"] == "episode" and trace["turns"] == len(turns)
    assert turns[0]["tool_calls"][0]["name"] == "get_record"
    check_masks(trace)
    ids = trace["token_ids"]
    completions, observations = spans_of(trace, "completion"), spans_of(trace, "observation")
    assert len(completions) == len(turns) and len(observations) == len(turns) - 1
    for turn, span in zip(turns, completions, strict=True):
        assert ids[span["start"] : span["end"]] == turn["completion_token_ids"]
        assert tokenizer.decode(ids[span["start"] : span["end"]], skip_special_tokens=True) == turn["text"]
        # What the model saw at this turn is exactly the trace up to here (the in-process model chains ids).
        assert ids[: span["start"]] == turn["prompt_token_ids"]
        assert trace["logprobs"][span["start"] : span["end"]] == pytest.approx(turn["logprobs"])
    (prompt,) = spans_of(trace, "prompt")
    messages = rollout.episode["messages"]
    first_reply = next(index for index, message in enumerate(messages) if message["role"] == "assistant")
    rendered = tokenizer.apply_chat_template(messages[:first_reply], add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(ids[prompt["start"] : prompt["end"]]) == rendered
    for turn, span in zip(turns, observations, strict=False):
        text = tokenizer.decode(ids[span["start"] : span["end"]])
        assert "<|im_start|>tool\n" in text and text.endswith("<|im_start|>assistant\n")
        assert all(observation["content"] in text for observation in turn["observations"])
        assert ids[span["start"] : span["end"]] == turn["environment_token_ids"]
    assert trace["context_matches"] == [True] * len(turns)
    # docs/trainers.md's example rebuilds the same texts.
    model_turns = run_readme_python("def model_turns")["model_turns"]
    assert model_turns(trace, tokenizer) == [turn["text"] for turn in turns]
    assert trace["reward"] == rollout.reward == 0.0 and trace["trainable"]
    assert trace["logprob_source"] == rollout.logprob_source == "pre_sampling"

    # ATIF over the API, for a trainer: one agent step per turn with its ids, tool calls and observations.
    # A trainer sees only the rollouts of tasks they may train on: none while the task is a draft.
    secret = api_token_create(user=charlie, name="traces", scopes=["export"])[1]
    url = f"/api/v1/campaigns/{episodes.pk}/traces.atif"
    assert lines(Client().get(url, HTTP_AUTHORIZATION=f"Bearer {secret}")) == []
    Task.objects.filter(key="copy-call").update(status=TaskStatus.APPROVED)
    (trajectory,) = lines(Client().get(url, HTTP_AUTHORIZATION=f"Bearer {secret}"))
    agent_steps = [step for step in trajectory["steps"] if step["source"] == "agent"]
    assert trajectory["schema_version"] == "ATIF-v1.4" and len(agent_steps) == len(turns)
    assert [step["metrics"]["completion_token_ids"] for step in agent_steps] == [
        turn["completion_token_ids"] for turn in turns
    ]
    call = agent_steps[0]["tool_calls"][0]
    assert call["function_name"] == "get_record" and call["arguments"] == {"table": "deals", "id": 1}
    assert agent_steps[0]["observation"]["results"][0]["source_call_id"] == call["tool_call_id"]
    assert trajectory["extra"]["trace"]["token_ids"] == ids and trajectory["extra"]["reward"] == 0.0

    harbor_validates_every_trajectory(campaigns, tmp_path)


def harbor_validates_every_trajectory(campaigns, tmp_path):
    """Harbor's TrajectoryValidator (its Pydantic models of ATIF) on every trajectory of both campaigns. Last in
    its test: on a machine without Python 3.12 for Harbor's side environment, the test skips here."""
    harbor = side_python("harbor")
    paths = []
    for campaign in campaigns:
        export(campaign, tmp_path / f"{campaign.pk}.atif.jsonl", "--file-type", "atif")
        for index, line in enumerate((tmp_path / f"{campaign.pk}.atif.jsonl").read_bytes().splitlines()):
            path = tmp_path / f"trajectory-{campaign.pk}-{index}.json"
            path.write_bytes(line)
            paths.append(str(path))
    assert len(paths) == 5  # four single-turn rollouts and one episode
    run = subprocess.run([harbor, "-c", HARBOR_CHECK, *paths], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {}


def lines(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return [orjson.loads(line) for line in b"".join(response.streaming_content).splitlines()]


HARBOR_CHECK = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator

problems = {}
for path in sys.argv[1:]:
    validator = TrajectoryValidator()
    if not validator.validate(path):
        problems[path] = validator.get_errors()
print(json.dumps(problems))
"""


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_an_episode_on_the_real_llama_server_joins_with_the_servers_own_environment_ids(
    llama_server, alice, tokenizer, tmp_path
):
    """On llama.cpp each turn's prompt is the server's rendering of the whole conversation; the trace joins
    the sampled ids with the environment's ids that the server's template and tokenizer gave, and says
    per turn whether that is exactly what the server sampled on."""
    flush_broker()
    workflow = environment_create(name="backoffice", domain="workflow")
    assert import_tasks(workflow, alice, repeat_the_call_task(), run_audits=True).ok
    model = services.probe_model_add(
        name="smollm2-llama",
        backend="openai",
        server="llama.cpp",
        base_url=f"{llama_server}/v1",
        model="smollm2",
        temperature=0.0,
        max_new_tokens=40,
    )
    campaign = services.campaign_start(
        environment=workflow, probe_model=model, created_by=alice, rollouts=1, round_size=1, seed=4
    )
    with running_worker(concurrency=1, log_path=tmp_path / "worker.log"):
        wait_for(lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=300, what="done")
    export(campaign, tmp_path / "llama.jsonl")
    (trace,) = jsonl(tmp_path / "llama.jsonl")
    turns = Rollout.objects.get(campaign=campaign).episode["turns"]
    assert len(turns) >= 2 and turns[0]["tool_calls"][0]["name"] == "get_record"
    assert trace["logprob_source"] == "pre_sampling" and trace["capture"] == "exact"
    check_masks(trace)
    ids = trace["token_ids"]
    assert ids[: len(turns[0]["prompt_token_ids"])] == turns[0]["prompt_token_ids"]
    for turn, span in zip(turns, spans_of(trace, "completion"), strict=True):
        assert ids[span["start"] : span["end"]] == turn["completion_token_ids"]
        # The model's own tokenizer (the GGUF file the server serves) reads the sampled ids as the reply.
        assert tokenizer.decode(ids[span["start"] : span["end"]], skip_special_tokens=True) == turn["text"]
    for turn, span in zip(turns, spans_of(trace, "observation"), strict=False):
        assert ids[span["start"] : span["end"]] == turn["environment_token_ids"]
        text = tokenizer.decode(ids[span["start"] : span["end"]])
        assert "<|im_start|>tool\n" in text and text.endswith("<|im_start|>assistant\n")
        assert all(observation["content"] in text for observation in turn["observations"])
    # Whether the server's own rendering of turn k's prompt is the trace up to there, turn by turn.
    assert trace["context_matches"] == [
        turn["prompt_token_ids"] == ids[: span["start"]]
        for turn, span in zip(turns, spans_of(trace, "completion"), strict=True)
    ]
