"""Turning an OpenAI-compatible server's answer into Generations: one per seed, with the server's token
ids and logprobs where it sent them (nothing is re-tokenised here). `decode_choices` takes the typed
fast path (openai_wire) where the answer fits its types and the generic path over dicts otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.backends import openai_wire
from engine.backends.base import FinishReason, Generation
from engine.backends.openai_transport import FewerChoicesError, FinalError, RetryableError, json_object

_TOKEN_ID_PREFIX = "token_id:"


def parse_response(*, payload: dict[str, Any], endpoint: str, seed: int) -> Generation:
    """Turn one chat or completions response (n=1) into a Generation, keeping the server's token ids."""
    return parse_choices(payload=payload, endpoint=endpoint, seeds=[seed])[0]


def decode_choices(*, raw: bytes, endpoint: str, seeds: list[int]) -> list[Generation]:
    """`parse_choices` of a raw answer: typed decoding (openai_wire) where the answer fits its types,
    the generic path over dicts otherwise; both give the same Generations."""
    response = openai_wire.decode_response(raw)
    if response is None:
        return parse_choices(payload=json_object(raw), endpoint=endpoint, seeds=seeds)
    assert response.choices  # decode_response gives None for an answer without choices
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

    Choice i (by its `index`) was sampled with `seeds[i]`. Raises RetryableError when the server
    aborted a sample (finish reason "abort" or none), and FinalError when choices are missing.
    """
    choices = payload.get("choices")
    if not choices or not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        raise FinalError(f"response has no choices: {str(payload)[:200]}")
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
    if n > 1 and len(choices) < n:
        raise FewerChoicesError(f"asked for {n} choices, got {len(choices)}")
    if set(by_index) != set(range(n)):
        raise FinalError(f"asked for {n} choices, got indices {sorted(by_index, key=str)[:20]}")
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
    finish_reason: FinishReason
    if server_finish == "length":
        finish_reason = "length"
    elif server_finish in ("stop", "tool_calls", "function_call", "eos"):
        finish_reason = "stop"
    else:  # "abort", None or anything unknown: the server did not finish this sample
        raise RetryableError(f"server finished the sample with finish_reason={server_finish!r}", reason="aborted")
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
