"""The interface every model backend speaks, and the seed each rollout gets.

Pure Python: no Django, no torch. A backend turns one prompt (chat messages) and a list of seeds into
one `Generation` per seed, captured exactly as the model produced it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "error"]
# Why a generation failed: the model server or device (retried later, never stored as an attempt), the
# task itself (its prompt does not fit the model's context: the author must shorten it), or the task's
# world (it failed the same way after a bounded retry: stored as the world's failure, never evidence).
ErrorKind = Literal["infrastructure", "prompt_too_long", "world"]
# How much of a rollout the backend captured: the sampled token ids with one logprob each ("exact"),
# the ids without logprobs ("ids_only"), or the text alone ("text_only": the server gave no ids).
Capture = Literal["exact", "ids_only", "text_only"]
CAPTURES: tuple[Capture, ...] = ("exact", "ids_only", "text_only")

# Seeds are stored in a signed 64-bit column and sent to servers that take an int64, so they keep 63 bits:
# a 62-bit base per (campaign, task version) plus the sample index.
SEED_BITS = 63
_SEED_BASE_BITS = SEED_BITS - 1
MAX_SAMPLE_INDEX = 2**31 - 1


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. `temperature == 0` means greedy; `stop` holds stop strings (not tokens)."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        # Accept a list from JSON config but keep the dataclass hashable and immutable.
        object.__setattr__(self, "stop", tuple(self.stop))
        if any(not isinstance(stop, str) or not stop for stop in self.stop):
            raise ValueError(f"stop must hold non-empty strings, got {self.stop!r}")


@dataclass
class Generation:
    """One sampled completion, as the backend produced it.

    Token ids and logprobs come from the model or the server, never from re-tokenising text; a field is
    None when the backend did not give it. `completion_token_ids` holds every sampled token, including
    the end-of-sequence token and the tokens of a matched stop string, while `text` is cut before the
    stop string and leaves out special tokens (the way vLLM reports both). `logprobs[i]` is the logprob
    of `completion_token_ids[i]`. `finish_reason == "error"` means the backend failed to generate
    (never a failed attempt); `error` then says why and `error_kind` whose fault it was.
    `logprob_source` names the distribution the logprobs come from (e.g. "pre_sampling": the model's
    own softmax, before temperature and top-p) and `prompt_ids_source` where the prompt ids come from
    ("server": the server's answer, "tokenize_endpoint": its tokenizer on the rendered prompt, "model":
    an in-process model); both are "" when there is nothing to describe.
    """

    text: str
    seed: int
    finish_reason: FinishReason
    truncated: bool = False
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    error: str | None = None
    latency_ms: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_kind: ErrorKind | None = None
    logprob_source: str = ""
    prompt_ids_source: str = ""

    @classmethod
    def failed(
        cls, *, seed: int, error: str, latency_ms: float = 0.0, kind: ErrorKind = "infrastructure"
    ) -> Generation:
        """A generation that could not be produced: finish reason "error", no text, no tokens."""
        return cls(text="", seed=seed, finish_reason="error", error=error, latency_ms=latency_ms, error_kind=kind)

    @property
    def capture(self) -> Capture:
        """How much of the sample was captured (see CAPTURES)."""
        ids = self.completion_token_ids
        if ids is None:
            return "text_only"
        if self.logprobs is not None and len(self.logprobs) == len(ids):
            return "exact"
        return "ids_only"


@runtime_checkable
class Backend(Protocol):
    """A model that samples completions. `name` is the backend kind ("transformers", "openai")."""

    name: str
    model: str
    revision: str

    def generate(self, *, messages: list[dict[str, str]], seeds: list[int], params: SamplingParams) -> list[Generation]:
        """Sample one completion of `messages` per seed; returns them in the order of `seeds`.

        The same seed with the same prompt and parameters gives the same completion (exactly on the
        transformers backend; as far as the server honours seeds on the openai backend).
        """
        ...

    def generate_many(
        self, *, prompts: list[tuple[list[dict[str, str]], list[int]]], params: SamplingParams
    ) -> list[list[Generation]]:
        """`generate` for each (messages, seeds) of `prompts`, in order. A server backend sends them
        together; an in-process backend may sample them one after another."""
        ...


def rollout_seed(*, campaign_seed: int, task_version_hash: str, sample_index: int) -> int:
    """The seed of one rollout: a 62-bit base from sha256 of (campaign seed, task version), plus the index.

    Stable across processes and machines. The samples of one task version get consecutive seeds, so
    two of them never share one, and a run of them is one vLLM request: with `n` and `seed=s`, vLLM
    samples choice i with seed s + i, exactly as n requests with seeds s, s + 1, ... would.
    """
    if not 0 <= sample_index <= MAX_SAMPLE_INDEX:
        raise ValueError(f"sample_index must lie in [0, {MAX_SAMPLE_INDEX}], got {sample_index}")
    material = f"passband-rollout-seed\x00{campaign_seed}\x00{task_version_hash}"
    digest = hashlib.sha256(material.encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") >> (64 - _SEED_BASE_BITS)) + sample_index
