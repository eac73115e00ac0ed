"""A small OpenAI-compatible HTTP server for tests and benchmarks: real sockets, fake model.

It answers POST /v1/chat/completions and /v1/completions the way vLLM does (with `return_token_ids`:
`prompt_token_ids` and `choices[].token_ids`; with `return_tokens_as_token_ids`: logprob entries named
"token_id:<id>"), plus GET /v1/models and /health. Its "model" is deterministic:

* tokens are UTF-8 bytes: token id = byte + 3 (0 pad, 1 bos, 2 eos), so `fake_decode(ids)` gives text;
* the chat prompt is rendered as "<role>content\\n" per message, then "<assistant>";
* the completion is random words drawn from the request's seed and prompt (greedy, temperature 0,
  ignores the seed), ending with the EOS token with probability `eos_probability` before each word,
  or whatever `respond(prompt_text, seed)` returns; with `n`, choice i uses seed + i, as vLLM's does;
* stop strings, max_tokens and finish reasons behave like vLLM's (the text is cut before a stop string;
  the token ids keep every generated token, EOS included).

Knobs make it fail: the first `fail_first` requests get HTTP `fail_with` (429 comes with Retry-After: 0),
or, with `fail_with="drop"`, a closed connection and no answer. It answers at once unless `latency_s`
is set; a ThreadingHTTPServer with keep-alive serves well over a thousand requests a second.

    with serve_openai(fail_first=2, fail_with=429) as base_url:   # "http://127.0.0.1:<port>/v1"
        ...
    with OpenAITestServer(supports_token_ids=False) as server:   # to inspect server.requests
        ...
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAKE_EOS_TOKEN_ID = 2
_BYTE_OFFSET = 3
_WORDS = (
    "the",
    "answer",
    "is",
    "42",
    "so",
    "we",
    "add",
    "two",
    "and",
    "three",
    "then",
    "check",
    "it",
    "step",
    "one",
    "result",
    "therefore",
    "x",
    "equals",
    "five",
    "proof",
    "done",
    "because",
    "of",
)


def fake_encode(text: str) -> list[int]:
    """Token ids of `text` under the fake tokenizer: one token per UTF-8 byte."""
    return [byte + _BYTE_OFFSET for byte in text.encode("utf-8")]


def fake_decode(token_ids: list[int]) -> str:
    """Text of fake token ids, leaving out special tokens (pad, bos, eos)."""
    return bytes(token_id - _BYTE_OFFSET for token_id in token_ids if token_id >= _BYTE_OFFSET).decode(
        "utf-8", errors="replace"
    )


def render_chat_prompt(messages: list[dict[str, Any]]) -> str:
    """The fake chat template: "<role>content\\n" per message (an assistant's tool calls as
    `<tool_call>` blocks after its content), then "<assistant>"."""
    return (
        "".join(
            f"<{message.get('role', 'user')}>{message.get('content') or ''}{_render_tool_calls(message)}\n"
            for message in messages
        )
        + "<assistant>"
    )


def _render_tool_calls(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    return "".join(
        f"<tool_call>{json.dumps({'name': call['function']['name'], 'arguments': call['function']['arguments']})}"
        "</tool_call>"
        for call in calls
    )


_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (failed ones included)."""

    path: str
    body: dict[str, Any] | None
    authorization: str | None


@dataclass(frozen=True)
class _Sample:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


class OpenAITestServer:
    """The server; a context manager that starts it on a free local port and stops it on exit."""

    def __init__(
        self,
        *,
        model: str = "fake-model",
        fail_first: int = 0,
        fail_with: int | str = 500,
        supports_token_ids: bool = True,
        supports_token_names: bool = True,
        supports_logprobs: bool = True,
        ids_in_logprob_entries: bool = False,
        respond: Callable[[str, int], str] | None = None,
        eos_probability: float = 0.25,
        latency_s: float = 0.0,
        api_key: str | None = None,
        record_requests: bool = True,
        tool_parser: bool = False,
        ignores_n: bool = False,
    ) -> None:
        """Configure the fake: see the module docstring. `supports_token_ids=False` ignores
        `return_token_ids` (no id fields), `supports_token_names=False` ignores
        `return_tokens_as_token_ids` (logprob entries named by text), `supports_logprobs=False` returns no
        logprobs, `ids_in_logprob_entries=True` puts each token's id in its chat logprob entry (as
        llama.cpp's server does). `api_key` set: requests without "Authorization: Bearer <api_key>" get 401.
        `tool_parser=True` acts like vLLM's hermes tool parser on chat requests that send `tools`:
        `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks in the sampled text become
        `message.tool_calls` (arguments as JSON text; a block that is not JSON is passed through as
        the arguments text), and the finish reason becomes "tool_calls". `ignores_n=True` answers one
        choice whatever `n` asks for.
        """
        if fail_with != "drop" and not (isinstance(fail_with, int) and 400 <= fail_with <= 599):
            raise ValueError(f"fail_with must be an HTTP error status or 'drop', got {fail_with!r}")
        self.model = model
        self.fail_first = fail_first
        self.fail_with = fail_with
        self.supports_token_ids = supports_token_ids
        self.supports_token_names = supports_token_names
        self.supports_logprobs = supports_logprobs
        self.ids_in_logprob_entries = ids_in_logprob_entries
        self.respond = respond
        self.eos_probability = eos_probability
        self.latency_s = latency_s
        self.api_key = api_key
        self.record_requests = record_requests
        self.tool_parser = tool_parser
        self.ignores_n = ignores_n
        self.requests: list[RecordedRequest] = []
        self.request_count = 0
        self._lock = threading.Lock()
        self._http_server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """ "http://127.0.0.1:<port>/v1" once started."""
        if self._http_server is None:
            raise RuntimeError("the server is not running")
        host, port = self._http_server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAITestServer:
        """Listen on a free port of 127.0.0.1 and serve from a background thread."""
        http_server = _HTTPServer(("127.0.0.1", 0), _Handler)
        http_server.fake = self
        self._http_server = http_server
        self._thread = threading.Thread(
            target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            self._http_server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # The request side, called from handler threads.

    def _admit(self, *, path: str, body: dict[str, Any] | None, authorization: str | None) -> int | str | None:
        """Count and record a request; return the failure to answer it with, or None."""
        with self._lock:
            number = self.request_count
            self.request_count += 1
            if self.record_requests:
                self.requests.append(RecordedRequest(path=path, body=body, authorization=authorization))
        return self.fail_with if number < self.fail_first else None

    def _sample(self, *, prompt_text: str, body: dict[str, Any], seed: int) -> _Sample:
        temperature = float(body.get("temperature", 1.0))
        max_tokens = int(body.get("max_tokens") or 16)
        stop = body.get("stop") or []
        stops = [stop] if isinstance(stop, str) else list(stop)
        # Greedy ignores the seed, as a real server would.
        rng = random.Random(f"{seed if temperature > 0 else 'greedy'}|{prompt_text}")

        if self.respond is not None:
            body_text, ends_with_eos = self.respond(prompt_text, seed), True
        else:
            words: list[str] = []
            ends_with_eos = False
            # Words until EOS, or until there are surely more bytes than max_tokens.
            while sum(len(word) + 1 for word in words) <= max_tokens:
                if words and rng.random() < self.eos_probability:
                    ends_with_eos = True
                    break
                words.append(rng.choice(_WORDS))
            body_text = " ".join(words)
        token_ids = fake_encode(body_text) + ([FAKE_EOS_TOKEN_ID] if ends_with_eos else [])
        text = body_text
        finish_reason = "stop" if ends_with_eos else "length"

        # The first event wins, as in sequential decoding: a stop string or EOS, then max_tokens.
        stop_ends = [
            (len(fake_encode(body_text[:position] + stop_string)), position)
            for stop_string in stops
            if stop_string and (position := body_text.find(stop_string)) >= 0
        ]
        if stop_ends:
            end, position = min(stop_ends)
            if end <= max_tokens:
                token_ids, text, finish_reason = token_ids[:end], body_text[:position], "stop"
        if len(token_ids) > max_tokens:
            token_ids = token_ids[:max_tokens]
            text, finish_reason = fake_decode(token_ids), "length"
        logprobs = [-round(rng.random() * 2.0, 4) for _ in token_ids]
        return _Sample(text=text, token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason)

    def _answer(self, *, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        chat = path.endswith("/chat/completions")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return 400, _error("messages must be a non-empty list")
            prompt_text = render_chat_prompt(messages)
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                return 400, _error("prompt must be a string")
            prompt_text = prompt
        n = 1 if self.ignores_n else int(body.get("n") or 1)
        if not 1 <= n <= 1024:
            return 400, _error("n must lie between 1 and 1024")
        # As vLLM: choice i of a seeded request is sampled with seed + i.
        seed = int(body.get("seed") or 0)
        samples = [self._sample(prompt_text=prompt_text, body=body, seed=seed + index) for index in range(n)]
        prompt_ids = fake_encode(prompt_text)
        with_ids = self.supports_token_ids and bool(body.get("return_token_ids"))
        as_ids = self.supports_token_names and bool(body.get("return_tokens_as_token_ids"))
        wants_logprobs = self.supports_logprobs and body.get("logprobs") not in (None, False)
        completion_tokens = sum(len(sample.token_ids) for sample in samples)
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion_tokens,
            "total_tokens": len(prompt_ids) + completion_tokens,
        }
        choices = [
            self._choice(
                index=index,
                sample=sample,
                chat=chat,
                body=body,
                prompt_ids=prompt_ids,
                with_ids=with_ids,
                as_ids=as_ids,
                wants_logprobs=wants_logprobs,
            )
            for index, sample in enumerate(samples)
        ]
        created = int(time.time())
        if chat:
            return 200, {
                "id": f"chatcmpl-{self.request_count}",
                "object": "chat.completion",
                "created": created,
                "model": self.model,
                "choices": choices,
                "usage": usage,
                "prompt_token_ids": prompt_ids if with_ids else None,
            }
        return 200, {
            "id": f"cmpl-{self.request_count}",
            "object": "text_completion",
            "created": created,
            "model": self.model,
            "choices": choices,
            "usage": usage,
        }

    def _choice(
        self,
        *,
        index: int,
        sample: _Sample,
        chat: bool,
        body: dict[str, Any],
        prompt_ids: list[int],
        with_ids: bool,
        as_ids: bool,
        wants_logprobs: bool,
    ) -> dict[str, Any]:
        names = [f"token_id:{token_id}" if as_ids else fake_decode([token_id]) for token_id in sample.token_ids]
        if chat:
            logprobs = (
                {
                    "content": [
                        {"token": name, "logprob": logprob, "bytes": list(name.encode()), "top_logprobs": []}
                        | ({"id": token_id} if self.ids_in_logprob_entries else {})
                        for name, logprob, token_id in zip(names, sample.logprobs, sample.token_ids, strict=True)
                    ]
                }
                if wants_logprobs
                else None
            )
            message, finish_reason = {"role": "assistant", "content": sample.text}, sample.finish_reason
            if self.tool_parser and body.get("tools"):
                message, finish_reason = _parse_tool_calls(sample.text, finish_reason)
            return {
                "index": index,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": finish_reason,
                "stop_reason": None,
                "token_ids": sample.token_ids if with_ids else None,
            }
        logprobs = (
            {
                "tokens": names,
                "token_logprobs": sample.logprobs,
                "top_logprobs": [{name: logprob} for name, logprob in zip(names, sample.logprobs, strict=True)],
                "text_offset": [],
            }
            if wants_logprobs
            else None
        )
        return {
            "index": index,
            "text": sample.text,
            "logprobs": logprobs,
            "finish_reason": sample.finish_reason,
            "stop_reason": None,
            "prompt_token_ids": prompt_ids if with_ids else None,
            "token_ids": sample.token_ids if with_ids else None,
        }


def _parse_tool_calls(text: str, finish_reason: str) -> tuple[dict[str, Any], str]:
    """The assistant message and finish reason a hermes tool parser would give for `text`."""
    blocks = _TOOL_CALL_BLOCK.findall(text)
    if not blocks:
        return {"role": "assistant", "content": text}, finish_reason
    calls = []
    for index, block in enumerate(blocks):
        try:
            parsed = json.loads(block)
            name, arguments = parsed.get("name", ""), json.dumps(parsed.get("arguments", {}))
        except (ValueError, AttributeError):
            name, arguments = "", block
        calls.append({"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": arguments}})
    content = _TOOL_CALL_BLOCK.sub("", text).strip() or None
    return {"role": "assistant", "content": content, "tool_calls": calls}, "tool_calls"


def _error(message: str, *, code: int = 400) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "code": code}}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Benchmarks open many connections at once; the default backlog of 5 would reset some.
    request_queue_size = 1024
    fake: OpenAITestServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is part of the tests, not an error of the server.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection serves many requests
    # Headers and body are two writes; with Nagle's algorithm the body waits ~40 ms for a delayed ACK.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # a benchmark makes thousands of requests; stderr is not the place for them

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            fake = self.server.fake
            self._send(200, {"object": "list", "data": [{"id": fake.model, "object": "model", "owned_by": "passband"}]})
        elif self.path == "/health":
            self._send(200, {})
        else:
            self._send(404, _error(f"no route {self.path}", code=404))

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        authorization = self.headers.get("Authorization")
        failure = fake._admit(path=self.path, body=body, authorization=authorization)
        if failure == "drop":
            self.close_connection = True  # close without a byte of answer, like a crashed server
            return
        if isinstance(failure, int):
            headers = {"Retry-After": "0"} if failure == 429 else {}
            self._send(failure, _error(f"injected failure {failure}", code=failure), headers=headers)
            return
        if fake.api_key is not None and authorization != f"Bearer {fake.api_key}":
            self._send(401, _error("missing or wrong API key", code=401))
            return
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, _error(f"no route {self.path}", code=404))
            return
        if not isinstance(body, dict):
            self._send(400, _error("the body must be a JSON object"))
            return
        if fake.latency_s:
            time.sleep(fake.latency_s)
        status, payload = fake._answer(path=self.path, body=body)
        self._send(status, payload)

    def _send(self, status: int, payload: dict[str, Any], *, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def serve_openai(**knobs: Any) -> Iterator[str]:
    """Run an OpenAITestServer configured by `knobs` for the block; yields its base URL (".../v1")."""
    with OpenAITestServer(**knobs) as server:
        yield server.base_url
