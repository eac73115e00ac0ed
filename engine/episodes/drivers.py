"""How an episode talks to each backend: one driver per backend turns the conversation so far into
a sampled reply and its tool calls (see runner.py for the episode loop and the transcript)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.backends.base import Generation, SamplingParams
from engine.backends.openai_parsing import parse_response
from engine.backends.openai_transport import PromptTooLongError, failure_message, json_object

MAX_CALLS_PER_TURN = 8


_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


@dataclass
class ParsedCall:
    """One tool call as the model wrote it; `problem` is set when it cannot be run."""

    call_id: str
    name: str
    arguments_text: str
    arguments: Any = None
    problem: str = ""


@dataclass
class TurnOutput:
    generation: Generation
    calls: list[ParsedCall]
    assistant_message: dict[str, Any]


def turn_seed(seed: int, turn_index: int) -> int:
    """The seed of turn k of the episode whose rollout seed is `seed` (turn 0 uses `seed` itself)."""
    if turn_index == 0:
        return seed
    digest = hashlib.sha256(f"passband-episode-turn\x00{seed}\x00{turn_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def parse_text_tool_calls(text: str) -> list[ParsedCall]:
    """Tool calls written as text: `<tool_call>{json}</tool_call>` blocks (Hermes/Qwen style), or a
    whole reply that is one JSON object with a "name". Unparseable blocks come back with `problem`."""
    blocks = [block.strip() for block in _TOOL_CALL_BLOCK.findall(text)]
    if not blocks:
        stripped = text.strip()
        if stripped.startswith("{") and '"name"' in stripped:
            blocks = [stripped]
    calls = []
    for index, block in enumerate(blocks[:MAX_CALLS_PER_TURN]):
        call = ParsedCall(call_id=f"call_{index}", name="", arguments_text=block)
        try:
            # raw_decode: a call cut short after its JSON (a missing or truncated "</tool_call>") still counts.
            value, _end = json.JSONDecoder().raw_decode(block)
        except ValueError as error:
            # Not only JSONDecodeError: an integer of more digits than Python converts is a plain ValueError.
            where = f"{error.msg} at character {error.pos}" if isinstance(error, json.JSONDecodeError) else str(error)
            call.problem = f"the tool call is not valid JSON ({where})"
            calls.append(call)
            continue
        if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
            call.problem = 'a tool call must be a JSON object {"name": ..., "arguments": {...}}'
            calls.append(call)
            continue
        call.name = value["name"]
        arguments = value.get("arguments", value.get("parameters", {}))
        call.arguments_text = json.dumps(arguments) if not isinstance(arguments, str) else arguments
        _set_arguments(call, arguments)
        calls.append(call)
    return calls


def _set_arguments(call: ParsedCall, arguments: Any) -> None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            call.problem = f"the arguments of {call.name} are not valid JSON"
            return
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        call.problem = f"the arguments of {call.name} must be a JSON object"
        return
    call.arguments = arguments


def _native_call(raw: Any, index: int) -> ParsedCall:
    """One entry of a chat answer's `tool_calls` (the server's own tool-call parsing)."""
    function = raw.get("function") or {} if isinstance(raw, dict) else {}
    arguments = function.get("arguments")
    call = ParsedCall(
        call_id=str(raw.get("id") or f"call_{index}") if isinstance(raw, dict) else f"call_{index}",
        name=str(function.get("name") or ""),
        arguments_text=arguments if isinstance(arguments, str) else json.dumps(arguments),
    )
    if not call.name:
        call.problem = "the tool call has no function name"
    else:
        _set_arguments(call, arguments)
    return call


class _OpenAIDriver:
    """The server renders the conversation. Tool mode "native": the `tools` field (with `tool_choice`
    "auto"), the server's template shows them and its parser returns `tool_calls`. Tool mode "text":
    the same instructions and `<tool_call>` parsing as the in-process driver, for templates that do
    not render tools (the probe model's setting; the server profile's default)."""

    def __init__(self, backend: Any, tools: list[dict[str, Any]]) -> None:
        if getattr(backend, "endpoint", "chat") != "chat":
            raise ValueError("tool-use episodes need the chat endpoint of the openai backend")
        self.backend = backend
        self.tools = tools
        self.native_tools = getattr(backend, "tool_mode", "native") == "native"
        self.prefix_consistent = True

    def prepare(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation the model starts from (tool instructions added in text mode)."""
        return list(messages) if self.native_tools else with_tool_instructions(messages, self.tools)

    def turn(self, *, history: list[dict[str, Any]], seed: int, params: SamplingParams) -> TurnOutput:
        backend = self.backend
        body = backend.request_body(messages=history, seed=seed, params=params)
        if self.native_tools:
            body["tools"] = self.tools
            body["tool_choice"] = "auto"
        url = f"{backend.base_url}/chat/completions"
        started = time.perf_counter()

        def attempt() -> tuple[dict[str, Any], Generation]:
            payload = json_object(backend.post(url=url, body=body))
            return payload, parse_response(payload=payload, endpoint="chat", seed=seed)

        # The backend's retry policy, with a tools field its generate() does not send.
        try:
            answer, failures = backend.retrying(attempt)
        except PromptTooLongError as too_long:
            reason = f"the conversation no longer fits the model's context ({too_long})"
            return TurnOutput(Generation.failed(seed=seed, error=reason, kind="prompt_too_long"), [], {})
        latency_ms = (time.perf_counter() - started) * 1000
        if answer is None:
            error = failure_message(server=backend.base_url, failures=failures)
            return TurnOutput(Generation.failed(seed=seed, error=error, latency_ms=latency_ms), [], {})
        payload, generation = answer
        generation.latency_ms = latency_ms
        profile = getattr(backend, "profile", None)
        if generation.prompt_token_ids is None and profile is not None and profile.tokenize:
            # The server's own rendering and tokenizer (llama.cpp), for the turn's prompt ids.
            generation.prompt_token_ids = backend.prompt_token_ids(
                messages=history, tools=self.tools if self.native_tools else None
            )
            generation.prompt_ids_source = "tokenize_endpoint" if generation.prompt_token_ids is not None else ""
        if generation.logprobs is not None and profile is not None:
            generation.logprob_source = profile.logprob_source
        message = payload["choices"][0].get("message") or {}
        native = message.get("tool_calls") or []
        if not native:
            calls = parse_text_tool_calls(generation.text)
            return TurnOutput(generation, calls, {"role": "assistant", "content": generation.text})
        calls = [_native_call(raw, index) for index, raw in enumerate(native[:MAX_CALLS_PER_TURN])]
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": message.get("content") or "",
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text or "{}"},
                }
                for call in calls
            ],
        }
        return TurnOutput(generation, calls, assistant)

    def observe(
        self, *, history: list[dict[str, Any]], added: list[dict[str, Any]], completion_ids: list[int] | None
    ) -> list[int] | None:
        """The environment's ids after this turn by the server's own template and tokenizer (llama.cpp's
        /apply-template, /detokenize and /tokenize), for training traces; None on servers without them.
        The server renders the whole conversation again next turn: sampling does not use them."""
        backend = self.backend
        profile = getattr(backend, "profile", None)
        if profile is None or not profile.tokenize or completion_ids is None:
            return None
        tools = self.tools if self.native_tools else None
        return environment_span(
            render=lambda messages: backend.rendered_prompt(messages=messages, tools=tools),
            decode=lambda ids: backend.detokenize(ids=ids),
            encode=lambda text: backend.tokenize(text=text, add_special=False),
            history=history,
            added=added,
            completion_ids=completion_ids,
        )


class _TransformersDriver:
    """Chains exact token ids across turns; see the module docstring."""

    def __init__(self, backend: Any, tools: list[dict[str, Any]]) -> None:
        self.backend = backend
        self.tokenizer = backend._tokenizer
        template = getattr(self.tokenizer, "chat_template", None) or ""
        if not template:
            raise ValueError(f"model {backend.model!r} has no chat template")
        self.native_tools = "tools" in template
        self.tools = tools
        self.next_prompt_ids: list[int] | None = None
        self.prefix_consistent = True

    def prepare(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation the model starts from: the tool instructions in the system message when
        the template cannot take `tools` itself."""
        return list(messages) if self.native_tools else with_tool_instructions(messages, self.tools)

    def _render(self, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
        options = {"tools": self.tools} if self.native_tools else {}
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt, **options
        )

    def _encode(self, text: str) -> list[int]:
        return [int(token) for token in self.tokenizer.encode(text, add_special_tokens=False)]

    def turn(self, *, history: list[dict[str, Any]], seed: int, params: SamplingParams) -> TurnOutput:
        backend = self.backend
        prompt_ids = self.next_prompt_ids
        if prompt_ids is None:
            prompt_ids = self._encode(self._render(history, generation_prompt=True))
        too_long = backend._context_error(prompt_length=len(prompt_ids), params=params)
        if too_long:
            return TurnOutput(Generation.failed(seed=seed, error=too_long, kind="prompt_too_long"), [], {})
        with backend._lock:
            try:
                generation = backend._generate_batch(prompt_ids=prompt_ids, seeds=[seed], params=params)[0]
            except RuntimeError as error:
                generation = Generation.failed(seed=seed, error=f"{type(error).__name__}: {error}")
        self._last = (prompt_ids, generation)
        calls = parse_text_tool_calls(generation.text)
        return TurnOutput(generation, calls, {"role": "assistant", "content": generation.text})

    def observe(
        self, *, history: list[dict[str, Any]], added: list[dict[str, Any]], completion_ids: list[int] | None
    ) -> list[int] | None:
        """Next turn's prompt ids: this turn's prompt and sampled ids, then the environment's ids, which
        are returned (None, and the next prompt rendered whole, when the template rewrites earlier turns)."""
        prompt_ids, generation = self._last
        environment_ids = environment_span(
            render=lambda messages: self._render(messages, generation_prompt=True),
            decode=lambda ids: self.tokenizer.decode(ids, skip_special_tokens=False),
            encode=self._encode,
            history=history,
            added=added,
            completion_ids=list(generation.completion_token_ids or []),
        )
        if environment_ids is None:
            self.prefix_consistent = False
            self.next_prompt_ids = None
        else:
            self.next_prompt_ids = prompt_ids + list(generation.completion_token_ids or []) + environment_ids
        return environment_ids


def environment_span(
    *,
    render: Callable[[list[dict[str, Any]]], str | None],
    decode: Callable[[list[int]], str | None],
    encode: Callable[[str], list[int] | None],
    history: list[dict[str, Any]],
    added: list[dict[str, Any]],
    completion_ids: list[int],
) -> list[int] | None:
    """The ids of what the environment adds between one turn's sampled tokens and the next turn's
    generation: the template's text after the reply, the tool messages and the next generation prompt,
    tokenized on their own, so the model's own tokens are never re-tokenized. `history` ends with the
    reply and the `added` tool messages; `render` gives a conversation's text with the generation
    prompt. None when the next prompt's text does not extend the last prompt and the sampled text (a
    template that rewrites earlier turns) or a step cannot say."""
    start = render(history[: len(history) - len(added) - 1])
    after = render(history)
    sampled = decode(completion_ids)
    if start is None or after is None or sampled is None or not after.startswith(start + sampled):
        return None
    return encode(after[len(start + sampled) :])


def with_tool_instructions(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with the tool instructions in the system message (one is added when there is none)."""
    instructions = tool_instructions(tools)
    if messages and messages[0].get("role") == "system":
        return [{**messages[0], "content": messages[0]["content"] + "\n\n" + instructions}, *messages[1:]]
    return [{"role": "system", "content": instructions}, *messages]


def tool_instructions(tools: list[dict[str, Any]]) -> str:
    """How a model whose chat template has no tool support is told about the tools."""
    specs = "\n".join(json.dumps(tool.get("function", tool), separators=(",", ":")) for tool in tools)
    return (
        "You can call these tools:\n<tools>\n" + specs + "\n</tools>\n"
        'To call a tool, reply with <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>, for example '
        '<tool_call>{"name": "' + _example_name(tools) + '", "arguments": {}}</tool_call>. '
        "The result comes back in a tool message. When the request is done, reply without a tool call."
    )


def _example_name(tools: list[dict[str, Any]]) -> str:
    names = [tool.get("function", tool).get("name", "") for tool in tools]
    return next((name for name in names if name), "tool_name")


def driver_for(backend: Any, tools: list[dict[str, Any]]) -> Any:
    if backend.name == "openai":
        return _OpenAIDriver(backend, tools)
    if backend.name == "transformers":
        return _TransformersDriver(backend, tools)
    raise ValueError(f"no episode driver for backend {backend.name!r}")
