"""Sampling from any OpenAI-compatible server (vLLM, SGLang, llama.cpp's server) over HTTP.

Each rollout has its own seed. By default each seed is one request (`n=1`, `seed=<seed>`), sent from a
bounded thread pool. With `samples_per_request > 1` a run of consecutive seeds s, s + 1, ... is one
request (`n=<run length>`, `seed=s`): vLLM samples choice i with seed s + i, so the answer is the
same as that of one request per seed, while the server reads the prompt once and Passband makes one
round trip instead of n. Only servers whose profile says so (openai_servers: vLLM) may do it; a server
that answers with fewer choices than asked is caught and the backend falls back to one per request.

Exact capture depends on the server (`server`, a profile in openai_servers): vLLM's
`return_token_ids` returns the prompt's and the completion's ids, llama.cpp's server names each
token's id in its logprob entries and gives prompt ids through its /tokenize endpoint. Whatever the
server leaves out is stored as None, and the rollout's capture says so ("text_only"): nothing is
re-tokenised here.

Timeouts, 429, 5xx and dropped connections are retried with exponential backoff (with jitter, and
honouring Retry-After); a seed whose request finally fails gives `Generation(finish_reason="error")`,
which upstream re-queues as an infrastructure error, never as a failed attempt. A prompt the server
refuses as longer than its context is `error_kind="prompt_too_long"`: the task's fault, shown to its
author.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from engine import outbound
from engine.backends import openai_transport
from engine.backends.base import Generation, SamplingParams
from engine.backends.openai_parsing import decode_choices
from engine.backends.openai_servers import TOOL_MODES, profile_for
from engine.backends.openai_transport import FewerChoicesError, PromptTooLongError, Result

logger = logging.getLogger(__name__)

ENDPOINTS = ("chat", "completions")


class OpenAIBackend:
    """Client of one OpenAI-compatible endpoint; thread-safe, one instance per worker process."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str = "",
        revision: str = "",
        endpoint: str = "chat",
        timeout_s: float = 120.0,
        max_retries: int = 5,
        max_concurrency: int = 16,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        server: str = "vllm",
        samples_per_request: int = 1,
        tool_mode: str = "",
    ) -> None:
        """Talk to `base_url` (e.g. "http://gpu-1:8000/v1"; a bare host gets "/v1") about `model`.

        The API key is read from the variable named `api_key_env` (none when empty), which the
        operator must have declared for `base_url`'s origin (engine/outbound); every connection goes
        through the outbound policy.
        `endpoint` is "chat" (/chat/completions, messages in) or "completions" (/completions, the one
        message's content in as a raw prompt). `max_retries` counts tries after the first.
        `samples_per_request` caps `n`: above 1, consecutive seeds share a request (see the module).
        `server` names the server's profile (openai_servers.SERVER_KINDS); `tool_mode` ("native" or
        "text", "" for the profile's default) how tool-use episodes show the model its tools.
        """
        if endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {ENDPOINTS}, got {endpoint!r}")
        if not model:
            raise ValueError("the openai backend needs the model name the server serves")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0 or samples_per_request < 1:
            raise ValueError("need max_concurrency >= 1, max_retries >= 0, timeout_s > 0 and samples_per_request >= 1")
        self.profile = profile_for(server)
        if samples_per_request > 1 and not self.profile.seeds_choices:
            raise ValueError(
                f"a {server} server does not seed choice i of n with seed + i: samples per request must be 1"
            )
        if tool_mode and tool_mode not in TOOL_MODES:
            raise ValueError(f"tool_mode must be one of {TOOL_MODES}, got {tool_mode!r}")
        self.tool_mode = tool_mode or self.profile.tool_mode
        self.base_url = normalise_base_url(base_url=base_url)
        self.model = model
        self.revision = revision
        self.endpoint = endpoint
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.max_concurrency = max_concurrency
        self.samples_per_request = samples_per_request
        if problem := outbound.url_problem(self.base_url):
            raise ValueError(f"base_url: {problem}")
        # The key only from a variable declared for this server's origin (raises OutboundRefused, a ValueError).
        headers = {"Content-Type": "application/json", **outbound.bearer_headers(api_key_env, url=self.base_url)}
        self._client = outbound.http_client(
            headers=headers,
            timeout_s=timeout_s,
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )
        # One pool per backend bounds the requests in flight across all threads of the worker.
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="openai-backend")
        self._closed = False
        self._close_lock = threading.Lock()
        # Cleared when the server answers a request for n choices with fewer (it ignores `n`).
        self._n_honoured = True
        self._prompt_ids: dict[bytes, list[int]] = {}

    def generate(self, *, messages: list[dict[str, str]], seeds: list[int], params: SamplingParams) -> list[Generation]:
        """Sample one completion of `messages` per seed; in the order of `seeds`."""
        return self.generate_many(prompts=[(messages, seeds)], params=params)[0]

    def generate_many(
        self, *, prompts: list[tuple[list[dict[str, str]], list[int]]], params: SamplingParams
    ) -> list[list[Generation]]:
        """`generate` for several (messages, seeds) at once: all their requests share the pool, so the
        server sees them together (up to `max_concurrency` in flight)."""
        if self.endpoint == "completions" and any(len(messages) != 1 for messages, _ in prompts):
            raise ValueError(
                "the completions endpoint sends one message's content as a raw prompt; a prompt here has "
                "several messages: use endpoint='chat'"
            )
        # Even a single request goes through the pool, which bounds the requests of all threads together.
        futures = [
            [
                self._pool.submit(self._generate_run, messages=messages, seeds=run, params=params)
                for run in seed_runs(seeds, limit=self.samples_per_request)
            ]
            for messages, seeds in prompts
        ]
        return [[generation for future in runs for generation in future.result()] for runs in futures]

    def close(self) -> None:
        """Release the connections and threads; the backend cannot be used afterwards."""
        with self._close_lock:
            if not self._closed:
                self._closed = True
                self._pool.shutdown(wait=True)
                self._client.close()

    def request_body(
        self, *, messages: list[dict[str, str]], seed: int, params: SamplingParams, n: int = 1
    ) -> dict[str, Any]:
        """The JSON body of the request for `n` samples seeded `seed`, `seed + 1`, ..."""
        body: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "seed": seed,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if self.endpoint == "chat":
            body["messages"] = messages
            body["logprobs"] = True
            body.update(self.profile.chat_fields)
        else:
            body["prompt"] = messages[0]["content"]
            body["logprobs"] = 1  # the sampled token's logprob (and the top-1, which we ignore)
            body.update(self.profile.completions_fields)
        return body

    def _generate_run(
        self, *, messages: list[dict[str, str]], seeds: list[int], params: SamplingParams
    ) -> list[Generation]:
        """One request for a run of consecutive seeds, retried as a whole; one Generation per seed."""
        if len(seeds) > 1 and not self._n_honoured:
            return [
                generation
                for seed in seeds
                for generation in self._generate_run(messages=messages, seeds=[seed], params=params)
            ]
        url = f"{self.base_url}/{'chat/completions' if self.endpoint == 'chat' else 'completions'}"
        body = self.request_body(messages=messages, seed=seeds[0], params=params, n=len(seeds))
        started = time.perf_counter()
        try:
            generations, failures = self.retrying(
                lambda: decode_choices(raw=self.post(url=url, body=body), endpoint=self.endpoint, seeds=seeds)
            )
        except FewerChoicesError as error:
            # Never fewer rollouts, never one choice stored twice: from now on one sample per request.
            logger.warning(
                "%s (model %s): %s; sending one sample per request from now on", self.base_url, self.model, error
            )
            self._n_honoured = False
            return self._generate_run(messages=messages, seeds=seeds, params=params)
        except PromptTooLongError as error:
            latency_ms = (time.perf_counter() - started) * 1000
            message = f"the prompt does not fit the model's context ({error})"
            return [
                Generation.failed(seed=seed, error=message, latency_ms=latency_ms, kind="prompt_too_long")
                for seed in seeds
            ]
        latency_ms = (time.perf_counter() - started) * 1000
        if generations is None and len(seeds) > 1 and failures and failures[-1].startswith("HTTP 4"):
            # A server that refuses `n` (or this many choices): one sample per request from now on.
            logger.warning(
                "%s refused n=%d (%s); sending one sample per request", self.base_url, len(seeds), failures[-1]
            )
            self._n_honoured = False
            return self._generate_run(messages=messages, seeds=seeds, params=params)
        if generations is None:
            message = openai_transport.failure_message(server=self.base_url, failures=failures)
            logger.warning(
                "openai generation failed (model %s, seeds %d..%d): %s", self.model, seeds[0], seeds[-1], message
            )
            return [Generation.failed(seed=seed, error=message, latency_ms=latency_ms) for seed in seeds]
        prompt_ids, prompt_ids_source = None, ""
        if self.profile.tokenize and generations[0].prompt_token_ids is None:
            prompt_ids = self.prompt_token_ids(messages=messages)
            prompt_ids_source = "tokenize_endpoint" if prompt_ids is not None else ""
        for generation in generations:
            generation.latency_ms = latency_ms
            generation.logprob_source = self.profile.logprob_source if generation.logprobs is not None else ""
            if generation.prompt_token_ids is not None:
                generation.prompt_ids_source = "server"
            elif prompt_ids is not None:
                generation.prompt_token_ids = list(prompt_ids)
                generation.prompt_ids_source = prompt_ids_source
        return generations

    def prompt_token_ids(
        self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> list[int] | None:
        """The prompt's ids by the server's own template and tokenizer (llama.cpp's /apply-template
        and /tokenize), for servers whose answers leave them out; None when the server cannot say."""
        key = orjson.dumps([messages, tools])
        with self._close_lock:
            cached = self._prompt_ids.get(key)
        if cached is not None:
            return list(cached)
        if self.endpoint == "chat":
            prompt = self.rendered_prompt(messages=messages, tools=tools)
        else:
            prompt = messages[0]["content"]
        ids = None if prompt is None else self.tokenize(text=prompt, add_special=True)
        if ids is None:
            return None
        with self._close_lock:
            if len(self._prompt_ids) >= 4096:  # the samples of one task share a prompt: a small cache does
                self._prompt_ids.clear()
            self._prompt_ids[key] = ids
        return list(ids)

    def rendered_prompt(
        self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> str | None:
        """The conversation as the server's chat template renders it, with the generation prompt
        (llama.cpp's /apply-template); None when the server cannot say."""
        request = {"messages": messages, **({"tools": tools} if tools else {})}
        prompt = self._server_call("apply-template", request, "prompt")
        return prompt if isinstance(prompt, str) else None

    def tokenize(self, *, text: str, add_special: bool = False) -> list[int] | None:
        """`text`'s ids by the server's own tokenizer (special tokens written as text are parsed as
        such; `add_special` adds the beginning-of-sequence token); None when the server cannot say."""
        ids = self._server_call(
            "tokenize", {"content": text, "add_special": add_special, "parse_special": True}, "tokens"
        )
        if not isinstance(ids, list) or not all(isinstance(token, int) for token in ids):
            return None
        return ids

    def detokenize(self, *, ids: list[int]) -> str | None:
        """The server's own text for `ids`, special tokens included; None when the server cannot say."""
        text = self._server_call("detokenize", {"tokens": ids}, "content")
        return text if isinstance(text, str) else None

    def _server_call(self, endpoint: str, request: dict[str, Any], field: str) -> Any:
        """POST to one of llama.cpp's own endpoints (beside /v1) and read one field of its answer."""
        root = self.base_url.removesuffix("/v1")
        try:
            answer = self._client.post(f"{root}/{endpoint}", json=request)
            answer.raise_for_status()
            return answer.json()[field]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            logger.warning("%s: no answer from /%s: %s", root, endpoint, error)
            return None

    def post(self, *, url: str, body: dict[str, Any]) -> bytes:
        """POST `body` on this backend's connections; the answer's bytes. Raises RetryableError or FinalError."""
        return openai_transport.post_raw(self._client, url=url, body=body)

    def retrying(self, attempt: Callable[[], Result]) -> tuple[Result | None, list[str]]:
        """`attempt()` under this backend's retry policy (see openai_transport.with_retries)."""
        return openai_transport.with_retries(
            attempt,
            server=self.base_url,
            max_retries=self.max_retries,
            backoff_s=lambda number, retry_after_s: openai_transport.backoff_s(
                attempt=number, retry_after_s=retry_after_s, base_s=self.backoff_base_s, max_s=self.backoff_max_s
            ),
        )


def normalise_base_url(*, base_url: str) -> str:
    """`base_url` without a trailing slash, with "/v1" added when it names only a host."""
    stripped = base_url.strip().rstrip("/")
    parts = urlsplit(stripped)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base_url must be an http(s) URL such as http://host:8000/v1, got {base_url!r}")
    return stripped if parts.path else f"{stripped}/v1"


def seed_runs(seeds: list[int], *, limit: int) -> list[list[int]]:
    """`seeds` cut, in order, into runs of consecutive integers of at most `limit` seeds each."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and len(runs[-1]) < limit and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return runs
