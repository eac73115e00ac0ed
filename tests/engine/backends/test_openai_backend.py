"""The openai backend against the local OpenAI-compatible test server (real HTTP, fake model)."""

import math

import pytest

from engine.backends import Backend, SamplingParams
from engine.backends.openai_backend import OpenAIBackend, normalise_base_url, seed_runs
from tests.support.openai_server import (
    FAKE_EOS_TOKEN_ID,
    OpenAITestServer,
    fake_decode,
    fake_encode,
    render_chat_prompt,
)
from tests.support.outbound import outbound_policy

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}]
PARAMS = SamplingParams(temperature=0.7, top_p=0.95, max_new_tokens=64)


def make_backend(base_url: str, **options) -> OpenAIBackend:
    options.setdefault("backoff_base_s", 0.001)
    return OpenAIBackend(base_url=base_url, model="fake-model", **options)


@pytest.fixture
def server():
    with OpenAITestServer() as running:
        yield running


def test_chat_captures_the_servers_token_ids_and_logprobs(server):
    backend = make_backend(server.base_url)
    assert isinstance(backend, Backend)
    generations = backend.generate(messages=MESSAGES, seeds=[1, 2, 3, 4], params=PARAMS)
    assert [generation.seed for generation in generations] == [1, 2, 3, 4]
    for generation in generations:
        assert generation.error is None
        assert generation.prompt_token_ids == fake_encode(render_chat_prompt(MESSAGES))
        assert generation.completion_token_ids and len(generation.logprobs) == len(generation.completion_token_ids)
        assert all(math.isfinite(logprob) and logprob <= 0 for logprob in generation.logprobs)
        assert fake_decode(generation.completion_token_ids) == generation.text
        assert generation.input_tokens == len(generation.prompt_token_ids)
        assert generation.output_tokens == len(generation.completion_token_ids)
        if generation.finish_reason == "stop":
            assert generation.completion_token_ids[-1] == FAKE_EOS_TOKEN_ID
        assert generation.latency_ms > 0


def test_completions_endpoint_captures_ids_from_the_choice(server):
    backend = make_backend(server.base_url, endpoint="completions")
    [generation] = backend.generate(messages=[{"role": "user", "content": "2 + 3 ="}], seeds=[9], params=PARAMS)
    assert server.requests[0].path == "/v1/completions"
    assert server.requests[0].body["prompt"] == "2 + 3 ="
    assert generation.prompt_token_ids == fake_encode("2 + 3 =")
    assert fake_decode(generation.completion_token_ids) == generation.text
    assert len(generation.logprobs) == len(generation.completion_token_ids)


def test_completions_endpoint_refuses_a_multi_message_prompt(server):
    backend = make_backend(server.base_url, endpoint="completions")
    with pytest.raises(ValueError, match="endpoint='chat'"):
        backend.generate(messages=MESSAGES, seeds=[1], params=PARAMS)


def test_each_seed_is_one_request_that_sends_the_seed_and_asks_for_ids(server):
    backend = make_backend(server.base_url)
    params = SamplingParams(temperature=0.5, top_p=0.9, max_new_tokens=7, stop=("END",))
    backend.generate(messages=MESSAGES, seeds=[101, 202, 303], params=params)
    bodies = sorted((request.body for request in server.requests), key=lambda body: body["seed"])
    assert [body["seed"] for body in bodies] == [101, 202, 303]
    for body in bodies:
        assert body["n"] == 1
        assert body["messages"] == MESSAGES
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (0.5, 0.9, 7, ["END"])
        assert body["logprobs"] is True
        assert body["return_token_ids"] is True and body["return_tokens_as_token_ids"] is True


def test_same_seed_same_completion_different_seeds_differ(server):
    backend = make_backend(server.base_url)
    first = backend.generate(messages=MESSAGES, seeds=list(range(10)), params=PARAMS)
    again = backend.generate(messages=MESSAGES, seeds=[3], params=PARAMS)[0]
    assert again.completion_token_ids == first[3].completion_token_ids
    assert len({tuple(generation.completion_token_ids) for generation in first}) >= 8


def test_seed_runs_cut_consecutive_seeds_into_bounded_runs():
    assert seed_runs([10, 11, 12, 13, 14, 40, 41, 7], limit=4) == [[10, 11, 12, 13], [14], [40, 41], [7]]
    assert seed_runs([3, 4, 5], limit=1) == [[3], [4], [5]]
    assert seed_runs([5, 4], limit=8) == [[5], [4]]
    assert seed_runs([], limit=8) == []


def test_consecutive_seeds_share_a_request_and_match_one_request_per_seed(server):
    seeds = [10, 11, 12, 13, 14, 15, 40, 41]
    one_each = make_backend(server.base_url).generate(messages=MESSAGES, seeds=seeds, params=PARAMS)
    server.requests.clear()
    shared = make_backend(server.base_url, samples_per_request=4).generate(
        messages=MESSAGES, seeds=seeds, params=PARAMS
    )
    asked = sorted((request.body["seed"], request.body["n"]) for request in server.requests)
    assert asked == [(10, 4), (14, 2), (40, 2)]
    assert [generation.seed for generation in shared] == seeds
    for alone, together in zip(one_each, shared, strict=True):
        assert together.completion_token_ids == alone.completion_token_ids
        assert together.logprobs == alone.logprobs and together.text == alone.text
        assert together.prompt_token_ids == alone.prompt_token_ids
        assert together.output_tokens == len(together.completion_token_ids)
        assert together.input_tokens == len(together.prompt_token_ids)
    assert len({tuple(generation.completion_token_ids) for generation in shared}) >= 6


def test_a_failing_shared_request_fails_every_seed_of_its_run():
    with OpenAITestServer(fail_first=1000, fail_with=503) as server:
        backend = make_backend(server.base_url, max_retries=1, samples_per_request=8)
        generations = backend.generate(messages=MESSAGES, seeds=[1, 2, 3], params=PARAMS)
        assert server.request_count == 2  # one run, two tries
    assert [generation.seed for generation in generations] == [1, 2, 3]
    assert all(generation.finish_reason == "error" and "HTTP 503" in generation.error for generation in generations)


def test_a_server_that_ignores_n_is_caught_and_asked_one_sample_per_request():
    # A server that answers one choice to n=3 must not have its one sample taken for three seeds, nor
    # leave two seeds without a rollout: the backend falls back to one request per seed, for good.
    with OpenAITestServer(ignores_n=True) as server:
        backend = make_backend(server.base_url, max_retries=0, samples_per_request=3)
        generations = backend.generate(messages=MESSAGES, seeds=[7, 8, 9], params=PARAMS)
        later = backend.generate(messages=MESSAGES, seeds=[10, 11], params=PARAMS)
        bodies = [request.body for request in server.requests]
    with OpenAITestServer() as server:
        one_each = make_backend(server.base_url).generate(messages=MESSAGES, seeds=[7, 8, 9, 10, 11], params=PARAMS)
    assert [generation.seed for generation in generations + later] == [7, 8, 9, 10, 11]
    assert [generation.text for generation in generations + later] == [generation.text for generation in one_each]
    assert all(generation.error is None for generation in generations + later)
    assert bodies[0]["n"] == 3 and [body["n"] for body in bodies[1:]] == [1] * 5


@pytest.mark.parametrize("failure", [429, 500, 503, "drop"])
def test_transient_failures_are_retried(failure):
    with OpenAITestServer(fail_first=2, fail_with=failure) as server:
        backend = make_backend(server.base_url, max_retries=3)
        [generation] = backend.generate(messages=MESSAGES, seeds=[5], params=PARAMS)
        assert generation.error is None
        assert generation.finish_reason in ("stop", "length")
        assert generation.completion_token_ids
        assert server.request_count == 3
        assert all(request.body["seed"] == 5 for request in server.requests)


@pytest.mark.parametrize("failure", [500, "drop"])
def test_a_request_that_keeps_failing_gives_an_error_generation(failure):
    with OpenAITestServer(fail_first=1000, fail_with=failure) as server:
        backend = make_backend(server.base_url, max_retries=2)
        generations = backend.generate(messages=MESSAGES, seeds=[1, 2], params=PARAMS)
        assert server.request_count == 6  # three tries per seed
    for generation in generations:
        assert generation.finish_reason == "error"
        assert "3 tries" in generation.error
        assert generation.completion_token_ids is None and generation.logprobs is None
        assert generation.text == ""
    expected = "HTTP 500" if failure == 500 else "RemoteProtocolError"
    assert expected in generations[0].error


def test_a_client_error_is_not_retried():
    with OpenAITestServer(fail_first=1000, fail_with=400) as server:
        backend = make_backend(server.base_url, max_retries=5)
        [generation] = backend.generate(messages=MESSAGES, seeds=[1], params=PARAMS)
        assert server.request_count == 1
    assert generation.finish_reason == "error"
    assert "HTTP 400" in generation.error


def test_a_slow_server_times_out_into_an_error_generation():
    with OpenAITestServer(latency_s=0.5) as server:
        backend = make_backend(server.base_url, timeout_s=0.1, max_retries=1)
        [generation] = backend.generate(messages=MESSAGES, seeds=[1], params=PARAMS)
    assert generation.finish_reason == "error"
    assert "Timeout" in generation.error


def test_a_server_without_token_ids_gives_none_never_retokenised():
    with OpenAITestServer(supports_token_ids=False, supports_token_names=False) as server:
        [generation] = make_backend(server.base_url).generate(messages=MESSAGES, seeds=[1], params=PARAMS)
    assert generation.prompt_token_ids is None
    assert generation.completion_token_ids is None
    assert generation.logprobs is not None and generation.text
    # Counts still come from the server's usage.
    assert generation.input_tokens == len(fake_encode(render_chat_prompt(MESSAGES)))


def test_token_names_give_completion_ids_when_return_token_ids_is_unsupported():
    with OpenAITestServer(supports_token_ids=False) as server:
        [generation] = make_backend(server.base_url).generate(messages=MESSAGES, seeds=[1], params=PARAMS)
    assert generation.prompt_token_ids is None
    assert fake_decode(generation.completion_token_ids) == generation.text


def test_ids_in_logprob_entries_give_completion_ids_as_llama_cpp_returns_them():
    with OpenAITestServer(supports_token_ids=False, supports_token_names=False, ids_in_logprob_entries=True) as server:
        [generation] = make_backend(server.base_url).generate(messages=MESSAGES, seeds=[1], params=PARAMS)
    assert generation.prompt_token_ids is None
    assert fake_decode(generation.completion_token_ids) == generation.text
    assert len(generation.logprobs) == len(generation.completion_token_ids)


def test_legacy_completions_logprobs_without_ids_give_none():
    with OpenAITestServer(supports_token_ids=False, supports_token_names=False) as server:
        backend = make_backend(server.base_url, endpoint="completions")
        [generation] = backend.generate(messages=[{"role": "user", "content": "2 + 3 ="}], seeds=[1], params=PARAMS)
    assert generation.completion_token_ids is None and generation.prompt_token_ids is None
    assert generation.logprobs is not None and len(generation.logprobs) == generation.output_tokens


def test_a_server_without_logprobs_gives_none():
    with OpenAITestServer(supports_logprobs=False) as server:
        [generation] = make_backend(server.base_url).generate(messages=MESSAGES, seeds=[1], params=PARAMS)
    assert generation.logprobs is None
    assert generation.completion_token_ids is not None


def test_max_tokens_gives_length_and_stop_strings_cut_the_text():
    with OpenAITestServer(respond=lambda prompt, seed: "first line\nsecond line") as server:
        backend = make_backend(server.base_url)
        [cut] = backend.generate(messages=MESSAGES, seeds=[1], params=SamplingParams(max_new_tokens=64, stop=("\n",)))
        [short] = backend.generate(messages=MESSAGES, seeds=[1], params=SamplingParams(max_new_tokens=5))
        [whole] = backend.generate(messages=MESSAGES, seeds=[1], params=SamplingParams(max_new_tokens=64))
    assert (cut.text, cut.finish_reason, cut.truncated) == ("first line", "stop", False)
    assert fake_decode(cut.completion_token_ids) == "first line\n"
    assert (short.text, short.finish_reason, short.truncated) == ("first", "length", True)
    assert (whole.text, whole.finish_reason) == ("first line\nsecond line", "stop")
    assert whole.completion_token_ids[-1] == FAKE_EOS_TOKEN_ID


def test_the_api_key_comes_from_the_named_environment_variable(monkeypatch):
    monkeypatch.setenv("PROBE_API_KEY", "sekret")
    with OpenAITestServer(api_key="sekret") as server:
        # The operator declared the variable for this server's origin (tests/engine/test_outbound.py: otherwise refused).
        with outbound_policy(secrets={"PROBE_API_KEY": [server.base_url.removesuffix("/v1")]}):
            backend = make_backend(server.base_url, api_key_env="PROBE_API_KEY")
        [generation] = backend.generate(messages=MESSAGES, seeds=[1], params=PARAMS)
        [refused] = make_backend(server.base_url).generate(messages=MESSAGES, seeds=[1], params=PARAMS)
    assert generation.error is None
    assert server.requests[0].authorization == "Bearer sekret"
    assert refused.finish_reason == "error" and "HTTP 401" in refused.error


def test_a_missing_api_key_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv("PROBE_API_KEY", raising=False)
    with pytest.raises(ValueError, match="PROBE_API_KEY"):
        make_backend("http://127.0.0.1:1/v1", api_key_env="PROBE_API_KEY")


def test_many_seeds_come_back_in_order_with_bounded_concurrency(server):
    backend = make_backend(server.base_url, max_concurrency=4)
    seeds = list(range(1000, 1064))
    generations = backend.generate(messages=MESSAGES, seeds=seeds, params=PARAMS)
    assert [generation.seed for generation in generations] == seeds
    assert all(generation.error is None for generation in generations)
    backend.close()


def test_base_urls_are_normalised():
    assert normalise_base_url(base_url="http://gpu-1:8000") == "http://gpu-1:8000/v1"
    assert normalise_base_url(base_url="http://gpu-1:8000/v1/") == "http://gpu-1:8000/v1"
    assert normalise_base_url(base_url="https://host/api/v1") == "https://host/api/v1"
    with pytest.raises(ValueError, match="http"):
        normalise_base_url(base_url="gpu-1:8000")
