"""What each kind of OpenAI-compatible server needs to be asked, and what its answers mean.

Servers share the OpenAI wire format but differ where exact capture lives: which request fields make
them return token ids and logprobs, whether a seed reproduces a completion, whether `n` choices are
seeded seed, seed + 1, ..., which distribution their logprobs describe, and where prompt ids come
from. One profile per server kind keeps those facts in one place; docs/backends.md (and the README's
probe-model section) say which of them are verified against the real server and how.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TOOL_MODES = ("native", "text")


@dataclass(frozen=True)
class ServerProfile:
    """The request fields and answer semantics of one kind of server.

    `chat_fields` / `completions_fields`: sent on every request of that endpoint. `seeds_choices`:
    with `n` and `seed=s`, choice i is sampled with seed s + i (only then may consecutive seeds share
    a request). `logprob_source`: the distribution the returned logprobs come from. `tokenize`: the
    server has llama.cpp's /apply-template and /tokenize endpoints, which give the prompt's ids when
    the answer does not. `prompt_ids_in_answer`: the answer carries the prompt's ids. `tool_mode`:
    the default way tools reach the model ("native": the `tools` field, rendered by the server's chat
    template and parsed back into `tool_calls`; "text": instructions in the system message and
    `<tool_call>` blocks parsed from the text, as for the in-process model).
    """

    name: str
    chat_fields: dict[str, Any] = field(default_factory=dict)
    completions_fields: dict[str, Any] = field(default_factory=dict)
    seeds_choices: bool = False
    logprob_source: str = ""
    tokenize: bool = False
    prompt_ids_in_answer: bool = False
    tool_mode: str = "native"


# vLLM: `return_token_ids` (0.10.2+) gives prompt and completion ids; `return_tokens_as_token_ids`
# names each logprob entry "token_id:<id>" (older versions). Logprobs are the model's raw ones
# (vLLM's default `--logprobs-mode raw_logprobs`); with n, vLLM seeds choice i with seed + i.
_VLLM_FIELDS = {"return_token_ids": True, "return_tokens_as_token_ids": True}

# llama.cpp's llama-server: every logprob entry carries the token's `id`. The chat endpoint returns
# logprobs only when asked (`logprobs: true`; `top_logprobs: 1` keeps one alternative instead of 20).
# `cache_prompt: false` makes a seed reproducible: a reused prompt cache changes the numerics.
# `post_sampling_probs: false` (its default, sent to pin it) gives the model's own logprobs before
# temperature and top-p. With `n` (at most its --parallel slots) it seeds choice i with seed + i
# (tools/server/server-task.h, "use different sampling seed for each child", in the llama.cpp that
# llama-cpp-python 0.3.36 vendors). Seeds are 32-bit there: the server keeps the low 32 bits, which
# still tell the consecutive seeds of one task apart.
_LLAMA_CPP_FIELDS = {"cache_prompt": False, "post_sampling_probs": False}

PROFILES: dict[str, ServerProfile] = {
    profile.name: profile
    for profile in (
        ServerProfile(
            name="vllm",
            chat_fields=_VLLM_FIELDS,
            completions_fields=_VLLM_FIELDS,
            seeds_choices=True,
            logprob_source="raw_logprobs",
            prompt_ids_in_answer=True,
        ),
        ServerProfile(
            name="llama.cpp",
            chat_fields={**_LLAMA_CPP_FIELDS, "top_logprobs": 1},
            completions_fields=_LLAMA_CPP_FIELDS,
            seeds_choices=True,
            logprob_source="pre_sampling",
            tokenize=True,
            # SmolLM2's and many GGUF chat templates do not render `tools`: the text form always works.
            tool_mode="text",
        ),
        # SGLang, llama-cpp-python's server and any other: the standard fields only. Capture is what
        # the answer holds (llama-cpp-python gives no ids: text_only).
        ServerProfile(name="openai-compatible"),
    )
}
SERVER_KINDS = tuple(PROFILES)


def profile_for(server: str) -> ServerProfile:
    """The profile of `server` (one of SERVER_KINDS). Raises ValueError for an unknown kind."""
    try:
        return PROFILES[server]
    except KeyError:
        raise ValueError(f"unknown server kind {server!r}; expected one of {', '.join(SERVER_KINDS)}") from None


# How servers say a prompt does not fit the context (HTTP 400): vLLM, llama.cpp, SGLang, OpenAI.
_PROMPT_TOO_LONG_MARKERS = (
    "maximum context length",
    "exceeds the available context size",
    "exceed_context_size",
    "context length exceeded",
    "context_length_exceeded",
    "longer than the model's context length",
    "is longer than the maximum",
)


def says_prompt_too_long(message: str) -> bool:
    """Whether a server's error message says the prompt (plus max tokens) exceeds the model's context."""
    lowered = message.lower()
    return any(marker in lowered for marker in _PROMPT_TOO_LONG_MARKERS)
