"""A real SmolLM2 episode on the CPU (short: two turns, few tokens): exact tokens and the loss mask.

SmolLM2's chat template has no tool support, so the tools and the `<tool_call>` convention go into
the system message and the call is parsed from the text. Greedy decoding of a "repeat this line"
prompt makes the 135M model write the tool call, so the episode has a second turn.
"""

import json

import pytest

from engine.backends import SamplingParams
from engine.episodes import backoffice
from engine.episodes.runner import EpisodeLimits, run_episode

pytestmark = [pytest.mark.model]

CALL = '<tool_call>{"name": "get_record", "arguments": {"table": "deals", "id": 1}}</tool_call>'


@pytest.fixture(scope="module")
def backend(smollm2_cpu):
    import torch

    # One thread: on a loaded CI machine torch's thread pool spins against other processes and a
    # 135M model then runs ~10x slower than on one thread. Restored for the rest of the session.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield smollm2_cpu
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def episode(backend):
    tools = [tool for tool in backoffice.TOOL_SCHEMAS if tool["function"]["name"] == "get_record"]
    return run_episode(
        backend=backend,
        messages=[{"role": "user", "content": f"Repeat this line exactly and write nothing else:\n{CALL}"}],
        tools=tools,
        environment="backoffice",
        world_seed=1,
        seed=0,
        params=SamplingParams(temperature=0, max_new_tokens=36),
        limits=EpisodeLimits(max_turns=2),
    ).transcript


def test_the_model_calls_a_tool_and_sees_the_observation(episode):
    assert len(episode["turns"]) == 2
    first = episode["turns"][0]
    assert first["tool_calls"][0]["name"] == "get_record"
    assert first["observations"][0]["status"] == "ok"
    assert json.loads(first["observations"][0]["content"])["id"] == 1
    assert episode["counts"]["tool_calls"] >= 1


def test_each_turn_keeps_exact_ids_and_logprobs(episode, backend):
    tokenizer = backend._tokenizer
    first, second = episode["turns"]
    for turn in (first, second):
        assert len(turn["logprobs"]) == len(turn["completion_token_ids"]) > 0
        assert all(value <= 0 for value in turn["logprobs"])
        assert tokenizer.decode(turn["completion_token_ids"], skip_special_tokens=True) == turn["text"]
    # The second prompt extends the first prompt and the sampled ids: nothing was re-tokenized.
    prefix = first["prompt_token_ids"] + first["completion_token_ids"]
    assert second["prompt_token_ids"][: len(prefix)] == prefix
    environment = tokenizer.decode(second["prompt_token_ids"][len(prefix) :])
    assert "<|im_start|>tool" in environment and '"stage"' in environment
    assert environment.endswith("<|im_start|>assistant\n")


def test_the_loss_mask_covers_exactly_the_model_tokens(episode):
    tokens = episode["tokens"]
    assert episode["prefix_consistent"] is True
    ids, mask, logprobs = tokens["ids"], tokens["loss_mask"], tokens["logprobs"]
    assert len(ids) == len(mask) == len(logprobs)
    first, second = episode["turns"]
    model_ids = [token for token, keep in zip(ids, mask) if keep]
    assert model_ids == first["completion_token_ids"] + second["completion_token_ids"]
    assert [value for value, keep in zip(logprobs, mask) if keep] == first["logprobs"] + second["logprobs"]
    assert ids[: tokens["prompt_length"]] == first["prompt_token_ids"] and not any(mask[: tokens["prompt_length"]])
    assert ids == second["prompt_token_ids"] + second["completion_token_ids"]
