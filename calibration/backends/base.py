"""The interface every model backend speaks, and the seed each rollout gets.

Pure Python: no Django, no torch. A backend turns one prompt (chat messages) and a list of seeds into
one `Generation` per seed, captured exactly as the model produced it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "length", "error"]

# Seeds are stored in a signed 64-bit column and sent to servers that take an int64, so they keep 63 bits.
SEED_BITS = 63


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
    (an infrastructure error, never a failed attempt); `error` then says why.
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

    @classmethod
    def failed(cls, *, seed: int, error: str, latency_ms: float = 0.0) -> Generation:
        """A generation that could not be produced: finish reason "error", no text, no tokens."""
        return cls(text="", seed=seed, finish_reason="error", error=error, latency_ms=latency_ms)


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


def rollout_seed(*, campaign_seed: int, task_version_hash: str, sample_index: int) -> int:
    """The seed of one rollout: a 63-bit integer from sha256 of (campaign seed, task version, index).

    Stable across processes and machines; two rollouts of a task version differ in `sample_index`, so
    their seeds differ (a collision would need two sha256 prefixes to agree in 63 bits).
    """
    if sample_index < 0:
        raise ValueError(f"sample_index must be >= 0, got {sample_index}")
    material = f"passband-rollout-seed\x00{campaign_seed}\x00{task_version_hash}\x00{sample_index}"
    digest = hashlib.sha256(material.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)
