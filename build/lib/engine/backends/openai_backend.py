"""Sampling from any OpenAI-compatible server (vLLM, SGLang, llama.cpp's server) over HTTP.

Each rollout has its own seed. By default each seed is one request (`n=1`, `seed=<seed>`), sent from a
bounded thread pool. With `samples_per_request > 1` a run of consecutive seeds s, s + 1, ... is one
request (`n=<run length>`, `seed=s`): vLLM samples choice i with seed s + i, so the answer is the
same as that of one request per seed, while the server reads the prompt once and Passband makes one
round trip instead of n. Use it only with servers that seed choices that way (vLLM does).

Exact capture follows vLLM's extensions: `return_token_ids` makes vLLM return the prompt's
and the completion's token ids (`prompt_token_ids`, `choices[].token_ids`), and
`return_tokens_as_token_ids` makes every logprob entry name its token as "token_id:<id>", which also
gives the completion ids on vLLM versions without `return_token_ids`. Whatever the server leaves out
is stored as None: nothing is re-tokenised here. Servers that reject unknown fields can be served with
`vllm_fields=False`.

Timeouts, 429, 5xx and dropped connections are retried with exponential backoff (with jitter, and
honouring Retry-After); a seed whose request finally fails gives `Generation(finish_reason="error")`,
which upstream records as an infrastructure error, never as a failed attempt.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable
from urllib.parse import urlsplit

import httpx
import orjson

from engine.backends import openai_wire
from engine.backends.base import Generation, SamplingParams

logger = logging.getLogger(__name__)

ENDPOINTS = ("chat", "completions")
_RETRY_STATUSES = frozenset({408, 425, 429}) | frozenset(range(500, 600))
_TOKEN_ID_PREFIX = "token_id:"


# Observers of requests, for metrics: each is called as hook(event, labels) with event "request"
# (labels server, result: ok, retry or error) or "retry" (labels server, reason). Errors in a hook are logged.
EVENT_HOOKS: list[Callable[[str, dict[str, str]], None]] = []


def _emit(event: str, **labels: str) -> None:
    for hook in EVENT_HOOKS:
        try:
            hook(event, labels)
        except Exception:  # noqa: BLE001 - observing must never break sampling
            logger.exception("openai backend event hook failed")


class _RetryableError(Exception):
    """A failure worth another try (429, 5xx, timeout, dropped connection); `reason` names its kind."""

    def __init__(self, message: str, *, retry_after_s: float | None = None, reason: str = "other") -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.reason = reason


class _FinalError(Exception):
    """A failure that another try would repeat (a 4xx other than 429, a malformed answer)."""


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
        vllm_fields: bool = True,
        samples_per_request: int = 1,
    ) -> None:
        """Talk to `base_url` (e.g. "http://gpu-1:8000/v1"; a bare host gets "/v1") about `model`.

        The API key is read from the environment variable named `api_key_env` (none when empty).
        `endpoint` is "chat" (/chat/completions, messages in) or "completions" (/completions, the one
        message's content in as a raw prompt). `max_retries` counts tries after the first.
        `samples_per_request` caps `n`: above 1, consecutive seeds share a request (see the module).
        """
        if endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {ENDPOINTS}, got {endpoint!r}")
        if not model:
            raise ValueError("the openai backend needs the model name the server serves")
        if max_concurrency < 1 or max_retries < 0 or timeout_s <= 0 or samples_per_request < 1:
            raise ValueError("need max_concurrency >= 1, max_retries >= 0, timeout_s > 0 and samples_per_request >= 1")
        self.base_url = normalise_base_url(base_url=base_url)
        self.model = model
        self.revision = revision
        self.endpoint = endpoint
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.vllm_fields = vllm_fields
        self.max_concurrency = max_concurrency
        self.samples_per_request = samples_per_request
        headers = {"Content-Type": "application/json"}
        if api_key_env:
            api_key = os.environ.get(api_key_env, "")
            if not api_key:
                raise ValueError(f"environment variable {api_key_env} (the API key) is empty or unset")
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )
        # One pool per backend bounds the requests in flight across all threads of the worker.
        self._pool = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="openai-backend")
        self._closed = False
        self._close_lock = threading.Lock()

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
        else:
            body["prompt"] = messages[0]["content"]
            body["logprobs"] = 1  # the sampled token's logprob (and the top-1, which we ignore)
        if self.vllm_fields:
            body["return_token_ids"] = True
            body["return_tokens_as_token_ids"] = True
        return body

    def _generate_run(
        self, *, messages: list[dict[str, str]], seeds: list[int], params: SamplingParams
    ) -> list[Generation]:
        """One request for a run of consecutive seeds, retried as a whole; one Generation per seed."""
        url = f"{self.base_url}/{'chat/completions' if self.endpoint == 'chat' else 'completions'}"
        body = self.request_body(messages=messages, seed=seeds[0], params=params, n=len(seeds))
        started = time.perf_counter()
        failures: list[str] = []
        for attempt in range(self.max_retries + 1):
            try:
                generations = decode_choices(
                    raw=self._post_raw(url=url, body=body), endpoint=self.endpoint, seeds=seeds
                )
                latency_ms = (time.perf_counter() - started) * 1000
                for generation in generations:
                    generation.latency_ms = latency_ms
                _emit("request", server=self.base_url, result="ok")
                return generations
            except _FinalError as error:
                failures.append(str(error))
                break
            except _RetryableError as error:
                failures.append(str(error))
                if attempt == self.max_retries:
                    break
                _emit("request", server=self.base_url, result="retry")
                _emit("retry", server=self.base_url, reason=error.reason)
                time.sleep(self._backoff_s(attempt=attempt, retry_after_s=error.retry_after_s))
        _emit("request", server=self.base_url, result="error")
        message = f"{self.base_url} failed after {len(failures)} tries: " + "; ".join(failures[-3:])
        logger.warning(
            "openai generation failed (model %s, seeds %d..%d): %s", self.model, seeds[0], seeds[-1], message
        )
        latency_ms = (time.perf_counter() - started) * 1000
        return [Generation.failed(seed=seed, error=message, latency_ms=latency_ms) for seed in seeds]

    def _post(self, *, url: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body`; the answer as a JSON object. Raises _RetryableError or _FinalError."""
        return _json_object(self._post_raw(url=url, body=body))

    def _post_raw(self, *, url: str, body: dict[str, Any]) -> bytes:
        """POST `body`; the answer's bytes when the status is a success. Raises _RetryableError or _FinalError."""
        try:
            response = self._client.post(url, content=orjson.dumps(body))
        except httpx.TransportError as error:  # timeouts, refused and dropped connections
            raise _RetryableError(f"{type(error).__name__}: {error}", reason="transport") from error
        if response.status_code in _RETRY_STATUSES:
            raise _RetryableError(
                f"HTTP {response.status_code}: {_error_text(response)}",
                retry_after_s=_retry_after_s(response),
                reason=f"http_{response.status_code}",
            )
        if response.status_code >= 400:
            raise _FinalError(f"HTTP {response.status_code}: {_error_text(response)}")
        return response.content

    def _backoff_s(self, *, attempt: int, retry_after_s: float | None) -> float:
        # Jitter keeps the workers that a 429 stopped together from retrying together.
        delay = min(self.backoff_max_s, self.backoff_base_s * 2**attempt) * random.uniform(0.5, 1.0)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.backoff_max_s))
        return delay


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


def parse_response(*, payload: dict[str, Any], endpoint: str, seed: int) -> Generation:
    """Turn one chat or completions response (n=1) into a Generation, keeping the server's token ids."""
    return parse_choices(payload=payload, endpoint=endpoint, seeds=[seed])[0]


def decode_choices(*, raw: bytes, endpoint: str, seeds: list[int]) -> list[Generation]:
    """`parse_choices` of a raw answer: typed decoding (openai_wire) where the answer fits its types,
    the generic path over dicts otherwise; both give the same Generations."""
    response = openai_wire.decode_response(raw)
    if response is None:
        return parse_choices(payload=_json_object(raw), endpoint=endpoint, seeds=seeds)
    by_index = _choices_by_index(response.choices, index_of=lambda choice: choice.index, n=len(seeds))
    usage = response.usage or {}
    return [
        _generation(
            openai_wire.choice_parts(response=response, choice=by_index[index], endpoint=endpoint),
            seed=seed,
            usage=usage,
            n=len(seeds),
        )
        for index, seed in enumerate(seeds)
    ]


def parse_choices(*, payload: dict[str, Any], endpoint: str, seeds: list[int]) -> list[Generation]:
    """Turn a chat or completions response with n = len(seeds) choices into Generations.

    Choice i (by its `index`) was sampled with `seeds[i]`. Raises _RetryableError when the server
    aborted a sample (finish reason "abort" or none), and _FinalError when choices are missing.
    """
    choices = payload.get("choices")
    if not choices or not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        raise _FinalError(f"response has no choices: {str(payload)[:200]}")
    by_index = _choices_by_index(choices, index_of=lambda choice: choice.get("index"), n=len(seeds))
    usage = payload.get("usage") or {}
    return [
        _generation(
            _choice_parts(choice=by_index[index], payload=payload, endpoint=endpoint),
            seed=seed,
            usage=usage,
            n=len(seeds),
        )
        for index, seed in enumerate(seeds)
    ]


def _choices_by_index(choices: list[Any], *, index_of: Callable[[Any], Any], n: int) -> dict[Any, Any]:
    by_index = {index_of(choice): choice for choice in choices} if n > 1 else {0: choices[0]}
    if set(by_index) != set(range(n)):
        raise _FinalError(f"asked for {n} choices, got indices {sorted(by_index, key=str)[:20]}")
    return by_index


def _choice_parts(*, choice: dict[str, Any], payload: dict[str, Any], endpoint: str) -> openai_wire.ChoiceParts:
    if endpoint == "chat":
        text = (choice.get("message") or {}).get("content") or ""
        prompt_token_ids = payload.get("prompt_token_ids", choice.get("prompt_token_ids"))
    else:
        text = choice.get("text") or ""
        prompt_token_ids = choice.get("prompt_token_ids", payload.get("prompt_token_ids"))
    logprobs, entry_ids, token_names = _logprob_entries(choice.get("logprobs"))
    return openai_wire.ChoiceParts(
        finish_reason=choice.get("finish_reason"),
        text=text,
        prompt_token_ids=prompt_token_ids,
        token_ids=choice.get("token_ids"),
        logprobs=logprobs,
        entry_ids=entry_ids,
        token_names=token_names,
    )


def _generation(parts: openai_wire.ChoiceParts, *, seed: int, usage: dict[str, Any], n: int) -> Generation:
    server_finish = parts.finish_reason
    if server_finish == "length":
        finish_reason = "length"
    elif server_finish in ("stop", "tool_calls", "function_call", "eos"):
        finish_reason = "stop"
    else:  # "abort", None or anything unknown: the server did not finish this sample
        raise _RetryableError(f"server finished the sample with finish_reason={server_finish!r}", reason="aborted")
    # The server's own ids, in order of preference: vLLM's `token_ids`, an id in each logprob entry
    # (llama.cpp's server), vLLM's "token_id:<id>" token names.
    completion_token_ids = parts.token_ids
    if completion_token_ids is None:
        completion_token_ids = parts.entry_ids
    if completion_token_ids is None and parts.token_names:
        completion_token_ids = _ids_from_token_names(parts.token_names)
    if parts.checked:  # typed decoding already made them lists of ints
        completion_ids, prompt_ids = completion_token_ids, parts.prompt_token_ids
    else:
        completion_ids, prompt_ids = _ints(completion_token_ids), _ints(parts.prompt_token_ids)
    # `usage` counts the prompt once and the completions of all n choices together.
    output_tokens = len(completion_ids) if completion_ids is not None else None
    if output_tokens is None and n == 1:
        output_tokens = usage.get("completion_tokens")
    return Generation(
        text=parts.text,
        seed=seed,
        finish_reason=finish_reason,
        truncated=finish_reason == "length",
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        logprobs=parts.logprobs,
        input_tokens=usage.get("prompt_tokens", len(prompt_ids) if prompt_ids is not None else None),
        output_tokens=output_tokens,
    )


def _logprob_entries(logprobs: Any) -> tuple[list[float] | None, list[int] | None, list[Any] | None]:
    """(logprobs, token ids, token names) from a choice's `logprobs`, each None when absent.

    Two shapes exist: {"content": [{"token", "logprob", "id"?}, ...]} (chat, and llama.cpp's
    completions) and the legacy completions {"tokens": [...], "token_logprobs": [...]}.
    """
    if not isinstance(logprobs, dict):
        return None, None, None
    entries = logprobs.get("content")
    if isinstance(entries, list):
        entries = [entry if isinstance(entry, dict) else {} for entry in entries]
        values = _floats([entry.get("logprob") for entry in entries])
        ids = _ints([entry.get("id") for entry in entries]) if entries else None
        return values, ids, [entry.get("token") for entry in entries]
    token_logprobs = logprobs.get("token_logprobs")
    values = _floats(token_logprobs) if isinstance(token_logprobs, list) else None
    return values, None, logprobs.get("tokens")


def _ids_from_token_names(tokens: list[Any]) -> list[int] | None:
    """Token ids from vLLM's "token_id:<id>" names; None unless every name has that form."""
    ids: list[int] = []
    for token in tokens:
        if not isinstance(token, str) or not token.startswith(_TOKEN_ID_PREFIX):
            return None
        try:
            ids.append(int(token[len(_TOKEN_ID_PREFIX) :]))
        except ValueError:
            return None
    return ids


def _ints(values: Any) -> list[int] | None:
    if not isinstance(values, list) or not all(isinstance(value, int) for value in values):
        return None
    return [int(value) for value in values]


def _floats(values: list[Any]) -> list[float] | None:
    # A missing logprob in the middle (a server quirk) makes the list unusable as a whole.
    if not all(isinstance(value, (int, float)) for value in values):
        return None
    return [float(value) for value in values]


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise _RetryableError(
            f"response is not JSON: {raw[:200].decode(errors='replace')!r}", reason="invalid_json"
        ) from error
    if not isinstance(payload, dict):
        raise _FinalError(f"response is not a JSON object: {raw[:200].decode(errors='replace')!r}")
    return payload


def _error_text(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:300]
    if isinstance(payload, dict) and payload.get("message"):
        return str(payload["message"])[:300]
    return str(payload)[:300]


def _retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from model servers, and the backoff covers it
