"""The openai backend against a real llama.cpp server (llama-server serving SmolLM2-135M on the CPU):
exact capture, seeds, n, truncation, a prompt longer than the context, the completions endpoint."""

import httpx
import pytest

from engine.backends.base import SamplingParams
from engine.backends.openai_backend import OpenAIBackend
from tests.support.llama_server import completion_text, detokenize

pytestmark = [pytest.mark.server]

MESSAGES = [{"role": "user", "content": "What is 17 + 25? Answer with the number."}]
STORY = [{"role": "user", "content": "Tell me a short story about a fox."}]
PARAMS = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=24)


def backend(url: str, **options) -> OpenAIBackend:
    return OpenAIBackend(base_url=url, model="smollm2", server="llama.cpp", max_retries=1, **options)


def test_every_id_is_the_servers_own_with_one_logprob_each(llama_server):
    generations = backend(llama_server).generate(messages=MESSAGES, seeds=[1, 2, 3], params=PARAMS)
    for generation in generations:
        assert generation.error is None
        assert generation.capture == "exact"
        assert completion_text(llama_server, generation.completion_token_ids) == generation.text
        assert len(generation.logprobs) == len(generation.completion_token_ids)
        assert all(logprob <= 0 for logprob in generation.logprobs)
        assert generation.logprob_source == "pre_sampling"
        assert generation.prompt_ids_source == "tokenize_endpoint"
        # The prompt ids from /tokenize are as many as the server itself counted.
        assert len(generation.prompt_token_ids) == generation.input_tokens


def test_the_completions_endpoint_captures_ids_too(llama_server):
    prompt = [{"role": "user", "content": "The capital of France is"}]
    [generation] = backend(llama_server, endpoint="completions").generate(messages=prompt, seeds=[4], params=PARAMS)
    assert generation.capture == "exact"
    assert completion_text(llama_server, generation.completion_token_ids) == generation.text
    assert detokenize(llama_server, generation.prompt_token_ids).endswith("The capital of France is")


def test_the_same_seed_gives_the_same_completion_whatever_the_cache_held(llama_server):
    client = backend(llama_server)
    [first] = client.generate(messages=STORY, seeds=[11], params=PARAMS)
    client.generate(messages=MESSAGES, seeds=[12, 13], params=PARAMS)  # another prompt in the server's cache
    [again] = client.generate(messages=STORY, seeds=[11], params=PARAMS)
    others = client.generate(messages=STORY, seeds=[14, 15, 16], params=PARAMS)
    assert again.completion_token_ids == first.completion_token_ids and again.logprobs == first.logprobs
    assert len({tuple(generation.completion_token_ids) for generation in [first, *others]}) > 1


def test_n_choices_are_the_completions_of_consecutive_seeds(llama_server):
    # llama-server seeds choice i of n with seed + i, as vLLM does: one request, the same rollouts.
    shared = backend(llama_server, samples_per_request=3).generate(messages=STORY, seeds=[21, 22, 23], params=PARAMS)
    single = backend(llama_server).generate(messages=STORY, seeds=[21, 22, 23], params=PARAMS)
    assert [g.completion_token_ids for g in shared] == [g.completion_token_ids for g in single]


def test_more_choices_than_the_server_has_slots_fall_back_to_one_per_request(llama_server):
    # The suite's server has 4 slots and refuses n=6 (HTTP 400): never fewer rollouts, never a duplicate.
    seeds = [31, 32, 33, 34, 35, 36]
    client = backend(llama_server, samples_per_request=6)
    generations = client.generate(messages=STORY, seeds=seeds, params=PARAMS)
    single = backend(llama_server).generate(messages=STORY, seeds=seeds, params=PARAMS)
    assert [g.seed for g in generations] == seeds and all(g.error is None for g in generations)
    assert [g.completion_token_ids for g in generations] == [g.completion_token_ids for g in single]
    assert client._n_honoured is False


def test_a_completion_cut_at_max_tokens_is_truncated(llama_server):
    [generation] = backend(llama_server).generate(
        messages=STORY, seeds=[41], params=SamplingParams(temperature=1.0, max_new_tokens=3)
    )
    assert generation.truncated and generation.finish_reason == "length"
    assert len(generation.completion_token_ids) == 3


def test_a_prompt_longer_than_the_context_is_the_tasks_error(llama_server):
    long_prompt = [{"role": "user", "content": "word " * 5000}]  # the suite's slots hold 2,048 tokens
    [generation] = backend(llama_server).generate(messages=long_prompt, seeds=[1], params=PARAMS)
    assert generation.finish_reason == "error" and generation.error_kind == "prompt_too_long"
    assert "context" in generation.error


def test_an_openai_compatible_profile_records_what_the_answer_holds(llama_server):
    # No llama.cpp fields: the chat answer still names each token's id, but no prompt ids come back.
    generic = OpenAIBackend(base_url=llama_server, model="smollm2", server="openai-compatible")
    [generation] = generic.generate(messages=MESSAGES, seeds=[5], params=PARAMS)
    assert generation.capture == "exact" and generation.prompt_token_ids is None
    assert completion_text(llama_server, generation.completion_token_ids) == generation.text


def test_the_servers_metrics_answer(llama_server):
    # --metrics is on: the server's own Prometheus endpoint, beside Passband's /metrics.
    assert "llamacpp:" in httpx.get(f"{llama_server}/metrics", timeout=120).text
