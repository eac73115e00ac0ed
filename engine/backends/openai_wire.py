"""Typed decoding of an OpenAI-compatible server's answer, without a Python object per token field.

With logprobs, a chat answer carries one `{"token", "logprob", "bytes", "top_logprobs"}` object per
token. msgspec decodes into these Structs instead, keeping only the fields Passband stores and
skipping the rest without allocating them (why, and the figures: docs/benchmarks-pipeline.md).

`decode_response` returns None for anything these types do not describe exactly (a field of an
unexpected type, a number out of range, no choices, not JSON): the caller then takes the generic
path over plain dicts, which accepts whatever the server sent. Both paths give the same Generations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import msgspec
from msgspec import UNSET, UnsetType


class _Entry(msgspec.Struct):
    logprob: float | None = None
    id: int | None = None
    token: str | None = None


class _LeanEntry(msgspec.Struct):
    # When the choice has vLLM's `token_ids`, an entry's id and name are never read: not even decoded.
    logprob: float | None = None


class _Logprobs(msgspec.Struct):
    content: list[_Entry] | None = None  # chat (and llama.cpp's completions)
    tokens: list[Any] | None = None  # legacy completions
    token_logprobs: list[float] | None = None


class _LeanLogprobs(msgspec.Struct):
    content: list[_LeanEntry] | None = None
    token_logprobs: list[float] | None = None


class _Message(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    index: Any = None
    message: _Message | None = None
    text: str | None = None
    logprobs: _Logprobs | None = None
    finish_reason: Any = None
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None | UnsetType = UNSET


class _LeanChoice(msgspec.Struct):
    index: Any = None
    message: _Message | None = None
    text: str | None = None
    logprobs: _LeanLogprobs | None = None
    finish_reason: Any = None
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None | UnsetType = UNSET


class Response(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    prompt_token_ids: list[int] | None | UnsetType = UNSET


class _LeanResponse(msgspec.Struct):
    choices: list[_LeanChoice] | None = None
    usage: dict[str, Any] | None = None
    prompt_token_ids: list[int] | None | UnsetType = UNSET


_DECODER = msgspec.json.Decoder(Response)
_LEAN_DECODER = msgspec.json.Decoder(_LeanResponse)


@dataclass(frozen=True)
class ChoiceParts:
    """What a Generation is made of, read from one choice; the id and logprob lists are not yet checked
    (the generic path's may hold anything), `checked` says they already are lists of int and float."""

    finish_reason: Any
    text: str
    prompt_token_ids: Any
    token_ids: Any
    logprobs: Any
    entry_ids: Any
    token_names: Any
    checked: bool = False


def decode_response(raw: bytes) -> Response | _LeanResponse | None:
    """The answer as typed Structs, or None when it is not exactly of that shape (see the module).

    First without the logprob entries' ids and names, which vLLM's `token_ids` make unneeded; only a
    choice without `token_ids` (other servers) makes it decode the answer again with them."""
    response: Response | _LeanResponse
    try:
        response = _LEAN_DECODER.decode(raw)
        if response.choices and any(
            choice.token_ids is None and choice.logprobs is not None for choice in response.choices
        ):
            response = _DECODER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return response if response.choices else None


def choice_parts(*, response: Response | _LeanResponse, choice: _Choice | _LeanChoice, endpoint: str) -> ChoiceParts:
    """The parts of one typed choice, read with the same precedence as the generic path."""
    if endpoint == "chat":
        text = (choice.message.content if choice.message is not None else None) or ""
        prompt_ids = response.prompt_token_ids
        if prompt_ids is UNSET:
            prompt_ids = choice.prompt_token_ids
    else:
        text = choice.text or ""
        prompt_ids = choice.prompt_token_ids
        if prompt_ids is UNSET:
            prompt_ids = response.prompt_token_ids
    logprobs: Any = None
    entry_ids: Any = None
    token_names: Any = None
    if choice.logprobs is not None:
        entries = choice.logprobs.content
        if entries is not None:
            values = [entry.logprob for entry in entries]
            logprobs = None if None in values else values
            if choice.token_ids is None:  # only then are ids and names read (and decoded: see decode_response)
                full = cast("list[_Entry]", entries)  # decoded with ids and names then, see decode_response
                ids = [entry.id for entry in full]
                entry_ids = None if not entries or None in ids else ids
                if entry_ids is None:
                    token_names = [entry.token for entry in full]
        else:
            logprobs = choice.logprobs.token_logprobs
            token_names = getattr(choice.logprobs, "tokens", None)
    return ChoiceParts(
        finish_reason=choice.finish_reason,
        text=text,
        prompt_token_ids=None if prompt_ids is UNSET else prompt_ids,
        token_ids=choice.token_ids,
        logprobs=logprobs,
        entry_ids=entry_ids,
        token_names=token_names,
        checked=True,
    )
