"""engine.traces: how rollouts become training traces, and which are marked not trainable.

The traces of real campaigns (the real server, the model's tokenizer) are checked in
tests/releases/test_campaign_traces.py; these cover the joins and exclusions on their own."""

import pytest

from engine import traces

POLICY = {"name": "m", "backend": "openai", "model": "smollm2", "file": "", "revision": "r1"}


def record(**fields):
    base = {
        "rollout_id": 1,
        "campaign": 2,
        "task_key": "t",
        "environment": "e",
        "version_hash": "h",
        "sample_index": 0,
        "seed": 5,
        "policy": POLICY,
        "prompt_token_ids": [1, 2, 3],
        "completion_token_ids": [4, 5],
        "logprobs": [-0.5, -0.25],
        "episode": None,
        "capture": "exact",
        "logprob_source": "pre_sampling",
        "outcome": "pass",
        "reward": 1.0,
        "detail": "ok",
        "text": "x",
    }
    return base | fields


def turn(prompt, completion, logprobs, environment=None):
    return {
        "prompt_token_ids": prompt,
        "completion_token_ids": completion,
        "logprobs": logprobs,
        "environment_token_ids": environment,
        "text": "",
        "tool_calls": [],
        "observations": [],
    }


def test_a_single_turn_rollout_is_its_prompt_then_its_completion():
    trace = traces.trace_of(record())
    assert trace["token_ids"] == [1, 2, 3, 4, 5]
    assert trace["loss_mask"] == [0, 0, 0, 1, 1]
    assert trace["logprobs"] == [0.0, 0.0, 0.0, -0.5, -0.25]
    assert [(s["kind"], s["start"], s["end"]) for s in trace["spans"]] == [("prompt", 0, 3), ("completion", 3, 5)]
    assert trace["trainable"] and trace["excluded"] == "" and trace["reward"] == 1.0


def test_episode_turns_join_with_the_environment_ids_recorded_between_them():
    # The server re-rendered turn 1's prompt differently (9 instead of 5): the recorded environment
    # span is used, never the re-rendered prompt, and the mismatch is reported.
    episode = {
        "turns": [
            turn([1, 2], [3, 4], [-1.0, -2.0], environment=[7, 8]),
            turn([1, 2, 3, 9, 7, 8], [5], [-3.0]),
        ]
    }
    trace = traces.trace_of(record(episode=episode, prompt_token_ids=None, completion_token_ids=None))
    assert trace["token_ids"] == [1, 2, 3, 4, 7, 8, 5]
    assert trace["loss_mask"] == [0, 0, 1, 1, 0, 0, 1]
    assert trace["logprobs"] == [0.0, 0.0, -1.0, -2.0, 0.0, 0.0, -3.0]
    assert [s["kind"] for s in trace["spans"]] == ["prompt", "completion", "observation", "completion"]
    assert trace["context_matches"] == [True, False]
    assert trace["trainable"] and trace["capture"] == "exact"


def test_without_recorded_environment_ids_a_next_prompt_that_extends_the_sequence_supplies_them():
    episode = {"turns": [turn([1], [2], [-1.0]), turn([1, 2, 6, 6], [3], [-1.0])]}
    trace = traces.trace_of(record(episode=episode))
    assert trace["token_ids"] == [1, 2, 6, 6, 3] and trace["context_matches"] == [True, True]


def test_an_episode_whose_turns_cannot_be_joined_is_marked():
    episode = {"turns": [turn([1], [2], [-1.0]), turn([9, 9], [3], [-1.0])]}
    trace = traces.trace_of(record(episode=episode))
    assert not trace["trainable"] and "cannot be joined" in trace["excluded"] and trace["token_ids"] is None


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (
            {"capture": "text_only", "prompt_token_ids": None, "completion_token_ids": None, "logprobs": None},
            "text_only",
        ),
        ({"outcome": "error", "reward": None}, "no reward (outcome error)"),
        ({"pruned": True}, "pruned"),
        ({"prompt_token_ids": None}, "no prompt token ids"),
    ],
)
def test_rollouts_that_cannot_be_trained_on_say_why(fields, reason):
    trace = traces.trace_of(record(**fields))
    assert not trace["trainable"] and reason in trace["excluded"]


def test_ids_without_logprobs_keep_the_sequence_and_drop_the_logprobs():
    trace = traces.trace_of(record(logprobs=None, capture="ids_only"))
    assert trace["token_ids"] == [1, 2, 3, 4, 5] and trace["logprobs"] is None and trace["capture"] == "ids_only"
    assert trace["trainable"]
