"""A vLLM-shaped server for the pipeline benchmark whose own cost is close to nothing.

The benchmark measures Passband, not the model server, yet both share the same CPU cores. The test
server of tests/support builds every logprob entry as Python objects and encodes them with the json
module, which at 250 tokens per completion costs more CPU than the pipeline it feeds. Here a pool of
completions is rendered once, in the exact shape vLLM answers with `logprobs`, `return_token_ids` and
`return_tokens_as_token_ids` (one `{"token": "token_id:<id>", "logprob", "bytes", "top_logprobs"}`
entry per token), and each request picks pool entries by (prompt, seed + i): deterministic, the same
bytes over the wire as a real server, and the client decodes all of it.

Completion lengths follow a real model's: log-normal with a median of about 200 tokens, clipped to
[50, 1000] (the `realistic` distribution); `max_tokens` truncates with finish reason "length". A
sample's last line is "42" (the bench's exact-match answer) with a probability drawn per prompt, so
the calibrations land in every band.
"""

from __future__ import annotations

import random
import threading
import zlib
from typing import Any

import orjson

from tests.support.openai_server import (
    FAKE_EOS_TOKEN_ID,
    OpenAITestServer,
    _Handler,
    _HTTPServer,
    fake_encode,
    render_chat_prompt,
)

_WORDS = ("the", "answer", "so", "we", "add", "two", "and", "three", "then", "check", "it", "step", "result")

LENGTHS = {
    # name: (median tokens, sigma of log, low, high)
    "realistic": (200.0, 0.75, 50, 1000),
    "short": (15.0, 0.5, 4, 40),
}


def completion_lengths(*, distribution: str, count: int, seed: int = 0) -> list[int]:
    """`count` completion lengths in tokens drawn from a named distribution of LENGTHS."""
    median, sigma, low, high = LENGTHS[distribution]
    rng = random.Random(seed)
    return [min(high, max(low, round(rng.lognormvariate(0.0, sigma) * median))) for _ in range(count)]


class PooledVLLMServer(OpenAITestServer):
    """Answers /v1/chat/completions from a pool of pre-rendered choices (see the module docstring)."""

    def __init__(self, *, max_tokens: int, distribution: str = "realistic", pool_size: int = 512, **knobs: Any) -> None:
        super().__init__(record_requests=False, **knobs)
        rng = random.Random(7)
        self.pool: list[tuple[bytes, bytes]] = []  # (choice JSON before its index, after its index)
        self.lengths: list[int] = []  # completion tokens of each pool entry
        for length in completion_lengths(distribution=distribution, count=pool_size, seed=11):
            head_tail, tokens = self._render(rng=rng, length=length, answer=rng.random() < 0.5, max_tokens=max_tokens)
            self.pool.append(head_tail)
            self.lengths.append(tokens)
        self.mean_tokens = sum(self.lengths) / len(self.lengths)

    @staticmethod
    def _render(*, rng: random.Random, length: int, answer: bool, max_tokens: int) -> tuple[tuple[bytes, bytes], int]:
        words: list[str] = []
        while sum(len(word) + 1 for word in words) < length - 3:
            words.append(rng.choice(_WORDS))
        text = (" ".join(words))[: max(length - 4, 0)] + ("\n42" if answer else "\n41")
        token_ids = [*fake_encode(text), FAKE_EOS_TOKEN_ID]
        finish_reason = "stop"
        if len(token_ids) > max_tokens:
            token_ids, finish_reason = token_ids[:max_tokens], "length"
            text = bytes(token - 3 for token in token_ids if token >= 3).decode("utf-8", errors="replace")
        entries = []
        for token_id in token_ids:
            name = f"token_id:{token_id}"
            entries.append(
                {
                    "token": name,
                    "logprob": -round(rng.random() * 2.0, 6),
                    "bytes": list(name.encode()),
                    "top_logprobs": [],
                }
            )
        choice = {
            "message": {"role": "assistant", "content": text},
            "logprobs": {"content": entries},
            "finish_reason": finish_reason,
            "stop_reason": None,
            "token_ids": token_ids,
        }
        return (b'{"index":', b"," + orjson.dumps(choice)[1:]), len(token_ids)

    def _answer_bytes(self, *, body: dict[str, Any]) -> bytes:
        prompt_text = render_chat_prompt(body.get("messages") or [])
        prompt_ids = fake_encode(prompt_text)
        n, seed = int(body.get("n") or 1), int(body.get("seed") or 0)
        # A per-prompt share of samples that end in "42": the bench's tasks land in every band.
        prompt_key = zlib.crc32(prompt_text.encode())
        picks = [zlib.crc32(str(seed + index).encode(), prompt_key) % len(self.pool) for index in range(n)]
        choices = [self.pool[pick][0] + str(index).encode() + self.pool[pick][1] for index, pick in enumerate(picks)]
        completion_tokens = sum(self.lengths[pick] for pick in picks)
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion_tokens,
            "total_tokens": len(prompt_ids) + completion_tokens,
        }
        return (
            b'{"id":"chatcmpl-bench","object":"chat.completion","created":0,"model":'
            + orjson.dumps(self.model)
            + b',"choices":['
            + b",".join(choices)
            + b'],"usage":'
            + orjson.dumps(usage)
            + b',"prompt_token_ids":'
            + orjson.dumps(prompt_ids)
            + b"}"
        )

    def start(self) -> PooledVLLMServer:
        http_server = _HTTPServer(("127.0.0.1", 0), _PooledHandler)
        http_server.fake = self
        self._http_server = http_server
        self._thread = threading.Thread(target=http_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self


class _PooledHandler(_Handler):
    def do_POST(self) -> None:
        fake: PooledVLLMServer = self.server.fake  # type: ignore[assignment]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        data = fake._answer_bytes(body=orjson.loads(raw))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
