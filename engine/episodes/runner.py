"""Multi-turn tool-use episodes: the model acts, the world answers, until the model is done.

    episode = run_episode(backend=backend, messages=task_prompt, tools=task_tools, environment="backoffice",
                          world_seed=17, seed=rollout_seed, params=SamplingParams(max_new_tokens=128),
                          limits=EpisodeLimits(max_turns=6))
    episode.transcript      # JSON-ready; see docs/episodes.md for the format
    episode.generation      # a Generation summarising the episode (flat token ids, text, finish reason)

One turn: the model samples a reply to the conversation so far; the tool calls in it run against
the world (a `SandboxedWorld` by default: every call in the code sandbox); each observation goes
back as a `tool` message. The episode ends when a reply has no tool call (`answered`), or at
`max_turns`, at `max_completion_tokens` over all turns, at `wall_seconds`, when a tool times out
(`tool_timeout`) or when the backend fails (`generation_error`).

Backends:
* `openai`: chat completions with `tools`; the server's `message.tool_calls` are used (vLLM with a
  tool parser), else `<tool_call>` blocks in the text. Each turn's prompt ids are the server's own
  rendering of the conversation; the flat episode sequence exists only when each turn's prompt
  starts with the previous prompt and completion (`prefix_consistent`).
* `transformers`: the model's chat template, given `tools=` when the template uses them; otherwise
  (SmolLM2's template has no tool support) the tools and the `<tool_call>{"name": ..., "arguments":
  ...}</tool_call>` convention go into the system message, and calls are parsed from the text.
  Turn k+1's prompt ids are turn k's prompt ids + its sampled ids + the environment's ids (the
  template's text between the reply and the next generation prompt, tokenized), so the model's
  tokens are never re-tokenized and the episode is always prefix-consistent.

Malformed calls (unparseable JSON, no name), unknown tools, bad arguments and tool exceptions are
observations the model sees, and are counted in `transcript["counts"]`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from engine.backends import openai_backend
from engine.backends.base import Generation, SamplingParams
from engine.episodes.world import SandboxedWorld, World

TRANSCRIPT_VERSION = 1
OBSERVATION_STATUSES = ("ok", "malformed", "unknown_tool", "bad_arguments", "tool_error", "timeout")
STOP_REASONS = ("answered", "max_turns", "max_tokens", "wall_time", "tool_timeout", "generation_error")
MAX_CALLS_PER_TURN = 8
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


@dataclass(frozen=True)
class EpisodeLimits:
    """Bounds of one episode. Tokens count the model's completion tokens over all turns."""

    max_turns: int = 6
    max_completion_tokens: int = 2048
    wall_seconds: float = 300.0
    tool_seconds: float = 5.0


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


@dataclass
class Episode:
    transcript: dict[str, Any]
    generation: Generation


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
            call.problem = f"the tool call is not valid JSON ({error.msg} at character {error.pos})"
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


# -- drivers ---------------------------------------------------------------------------------------


class _OpenAIDriver:
    def __init__(self, backend: Any, tools: list[dict[str, Any]]) -> None:
        if getattr(backend, "endpoint", "chat") != "chat":
            raise ValueError("tool-use episodes need the chat endpoint of the openai backend")
        self.backend = backend
        self.tools = tools
        self.prefix_consistent = True

    def turn(self, *, history: list[dict[str, Any]], seed: int, params: SamplingParams) -> TurnOutput:

        backend = self.backend
        body = backend.request_body(messages=history, seed=seed, params=params)
        body["tools"] = self.tools
        url = f"{backend.base_url}/chat/completions"
        started = time.perf_counter()
        failures: list[str] = []
        payload = None
        # The backend's retry policy, with a tools field its generate() does not send.
        for attempt in range(backend.max_retries + 1):
            try:
                payload = backend._post(url=url, body=body)
                generation = openai_backend.parse_response(payload=payload, endpoint="chat", seed=seed)
                break
            except openai_backend._FinalError as error:
                failures.append(str(error))
                payload = None
                break
            except openai_backend._RetryableError as error:
                failures.append(str(error))
                payload = None
                if attempt < backend.max_retries:
                    time.sleep(backend._backoff_s(attempt=attempt, retry_after_s=error.retry_after_s))
        latency_ms = (time.perf_counter() - started) * 1000
        if payload is None:
            message = f"{backend.base_url} failed after {len(failures)} tries: " + "; ".join(failures[-3:])
            return TurnOutput(Generation.failed(seed=seed, error=message, latency_ms=latency_ms), [], {})
        generation.latency_ms = latency_ms
        message = payload["choices"][0].get("message") or {}
        native = message.get("tool_calls") or []
        calls: list[ParsedCall] = []
        for index, raw in enumerate(native[:MAX_CALLS_PER_TURN]):
            function = raw.get("function") or {} if isinstance(raw, dict) else {}
            call = ParsedCall(
                call_id=str(raw.get("id") or f"call_{index}") if isinstance(raw, dict) else f"call_{index}",
                name=str(function.get("name") or ""),
                arguments_text=function.get("arguments") if isinstance(function.get("arguments"), str) else
                json.dumps(function.get("arguments")),
            )
            if not call.name:
                call.problem = "the tool call has no function name"
            else:
                _set_arguments(call, function.get("arguments"))
            calls.append(call)
        if not native:
            calls = parse_text_tool_calls(generation.text)
        assistant: dict[str, Any] = {"role": "assistant", "content": generation.text}
        if native:
            assistant["content"] = message.get("content") or ""
            assistant["tool_calls"] = [
                {"id": call.call_id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments_text or "{}"}}
                for call in calls
            ]
        return TurnOutput(generation, calls, assistant)

    def observe(self, *, history: list[dict[str, Any]], added: list[dict[str, Any]]) -> None:
        """The server renders the whole conversation again next turn: nothing to do here."""


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
        if self.native_tools:
            return list(messages)
        instructions = tool_instructions(self.tools)
        if messages and messages[0].get("role") == "system":
            return [{**messages[0], "content": messages[0]["content"] + "\n\n" + instructions}, *messages[1:]]
        return [{"role": "system", "content": instructions}, *messages]

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
            return TurnOutput(Generation.failed(seed=seed, error=too_long), [], {})
        with backend._lock:
            try:
                generation = backend._generate_batch(prompt_ids=prompt_ids, seeds=[seed], params=params)[0]
            except RuntimeError as error:
                generation = Generation.failed(seed=seed, error=f"{type(error).__name__}: {error}")
        self._last = (prompt_ids, generation)
        calls = parse_text_tool_calls(generation.text)
        return TurnOutput(generation, calls, {"role": "assistant", "content": generation.text})

    def observe(self, *, history: list[dict[str, Any]], added: list[dict[str, Any]]) -> None:
        """Next turn's prompt ids: this turn's prompt and sampled ids, then the environment's ids."""
        prompt_ids, generation = self._last
        before_reply = history[: len(history) - len(added) - 1]
        with_reply = history[: len(history) - len(added)]
        start = self._render(before_reply, generation_prompt=True)
        replied = self._render(with_reply, generation_prompt=False)
        after = self._render(history, generation_prompt=True)
        sampled = self.tokenizer.decode(generation.completion_token_ids or [], skip_special_tokens=False)
        rendered_reply = replied[len(start):] if replied.startswith(start) else None
        if rendered_reply is not None and rendered_reply.startswith(sampled) and after.startswith(replied):
            environment_text = rendered_reply[len(sampled):] + after[len(replied):]
            self.next_prompt_ids = prompt_ids + list(generation.completion_token_ids or []) + self._encode(
                environment_text
            )
        else:  # the template rewrites earlier turns: fall back to rendering the whole conversation
            self.prefix_consistent = False
            self.next_prompt_ids = None


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


def _driver_for(backend: Any, tools: list[dict[str, Any]]) -> Any:
    if backend.name == "openai":
        return _OpenAIDriver(backend, tools)
    if backend.name == "transformers":
        return _TransformersDriver(backend, tools)
    raise ValueError(f"no episode driver for backend {backend.name!r}")


# -- the episode -------------------------------------------------------------------------------------


def run_episode(
    *,
    backend: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    environment: str,
    world_seed: int,
    seed: int,
    params: SamplingParams,
    limits: EpisodeLimits = EpisodeLimits(),
    world: World | None = None,
) -> Episode:
    """Run one episode of `backend` on the task (`messages`, `tools`) in a world of (environment,
    world_seed); `seed` is the rollout's seed (turn k samples with `turn_seed(seed, k)`).
    Never raises because of the model or a tool; raises ValueError for a backend it cannot drive."""
    started = time.perf_counter()
    driver = _driver_for(backend, tools)
    world = world or SandboxedWorld(environment=environment, seed=world_seed, tool_seconds=limits.tool_seconds)
    history = driver.prepare(messages) if hasattr(driver, "prepare") else list(messages)
    counts = {status: 0 for status in OBSERVATION_STATUSES} | {"tool_calls": 0}
    turns: list[dict[str, Any]] = []
    used_tokens = 0
    stop_reason = "max_turns"
    error = None
    for turn_index in range(limits.max_turns):
        if time.perf_counter() - started > limits.wall_seconds:
            stop_reason = "wall_time"
            break
        remaining = limits.max_completion_tokens - used_tokens
        if remaining <= 0:
            stop_reason = "max_tokens"
            break
        turn_params = dataclasses.replace(params, max_new_tokens=min(params.max_new_tokens, remaining))
        output = driver.turn(history=history, seed=turn_seed(seed, turn_index), params=turn_params)
        generation = output.generation
        turn: dict[str, Any] = {
            "index": turn_index,
            "seed": generation.seed,
            "prompt_token_ids": generation.prompt_token_ids,
            "completion_token_ids": generation.completion_token_ids,
            "logprobs": generation.logprobs,
            "text": generation.text,
            "finish_reason": generation.finish_reason,
            "latency_ms": round(generation.latency_ms, 3),
            "tool_calls": [],
            "observations": [],
        }
        turns.append(turn)
        if generation.error is not None:
            stop_reason, error = "generation_error", generation.error
            turn["error"] = generation.error
            break
        used_tokens += generation.output_tokens or len(generation.completion_token_ids or [])
        history.append(output.assistant_message)
        if not output.calls:
            stop_reason = "max_tokens" if generation.truncated else "answered"
            break
        added: list[dict[str, Any]] = []
        timed_out = False
        for call in output.calls:
            counts["tool_calls"] += 1
            turn["tool_calls"].append(
                {"id": call.call_id, "name": call.name, "arguments": call.arguments_text, "parsed": call.arguments}
            )
            if call.problem:
                status, content, latency_ms = "malformed", json.dumps({"error": call.problem}), 0.0
            else:
                result = world.call(call.name, call.arguments)
                status, content, latency_ms = result.status, result.content, result.latency_ms
            counts[status] += 1
            turn["observations"].append(
                {"tool_call_id": call.call_id, "name": call.name, "status": status, "content": content,
                 "latency_ms": round(latency_ms, 3)}
            )
            added.append({"role": "tool", "tool_call_id": call.call_id, "name": call.name or "invalid",
                          "content": content})
            if status == "timeout":
                timed_out = True
                break
        history.extend(added)
        if timed_out:
            stop_reason = "tool_timeout"
            break
        driver.observe(history=history, added=added)
    final_state = None
    if stop_reason not in ("tool_timeout", "generation_error"):
        try:
            final_state = world.state()
        except RuntimeError as state_error:
            error = f"could not read the final state: {state_error}"
    transcript = {
        "version": TRANSCRIPT_VERSION,
        "environment": environment,
        "seed": world_seed,
        "rollout_seed": seed,
        "backend": backend.name,
        "messages": history,
        "turns": turns,
        "counts": counts,
        "stop_reason": stop_reason,
        "error": error,
        "wall_ms": round((time.perf_counter() - started) * 1000, 3),
        "final_state": final_state,
    }
    transcript.update(flat_tokens(turns) if driver.prefix_consistent else {"tokens": None})
    # Whether the turns form one token sequence (each prompt extends the previous prompt and completion).
    transcript["prefix_consistent"] = transcript["tokens"] is not None
    return Episode(transcript=transcript, generation=_summary(transcript, seed=seed))


def flat_tokens(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The episode as one sequence: the first prompt, then for each turn its sampled tokens (loss
    mask 1) and the environment's tokens up to the next turn's prompt (mask 0). `tokens` is None
    when a turn's prompt does not extend the previous prompt and completion."""
    if not turns or any(turn["prompt_token_ids"] is None or turn["completion_token_ids"] is None for turn in turns):
        return {"tokens": None}
    prompt = list(turns[0]["prompt_token_ids"])
    sequence = list(prompt)
    mask: list[int] = [0] * len(prompt)
    logprobs: list[float] = [0.0] * len(prompt)
    for position, turn in enumerate(turns):
        if position > 0:
            next_prompt = turn["prompt_token_ids"]
            if next_prompt[: len(sequence)] != sequence:
                return {"tokens": None}
            environment = next_prompt[len(sequence):]
            sequence += environment
            mask += [0] * len(environment)
            logprobs += [0.0] * len(environment)
        completion = turn["completion_token_ids"]
        sequence += completion
        mask += [1] * len(completion)
        logprobs += list(turn["logprobs"] or [0.0] * len(completion))
    return {"tokens": {"prompt_length": len(prompt), "ids": sequence, "loss_mask": mask, "logprobs": logprobs}}


def _summary(transcript: dict[str, Any], *, seed: int) -> Generation:
    """A Generation for the Rollout row: first prompt, then everything after it (model and
    environment tokens, the loss mask in the transcript tells which is which)."""
    turns = transcript["turns"]
    last_text = turns[-1]["text"] if turns else ""
    if transcript["stop_reason"] == "generation_error":
        return Generation.failed(seed=seed, error=transcript["error"] or "generation failed",
                                 latency_ms=transcript["wall_ms"])
    tokens = transcript.get("tokens")
    prompt_ids = completion_ids = logprobs = None
    if tokens:
        prompt_ids = tokens["ids"][: tokens["prompt_length"]]
        completion_ids = tokens["ids"][tokens["prompt_length"]:]
        logprobs = tokens["logprobs"][tokens["prompt_length"]:]
    truncated = transcript["stop_reason"] in ("max_turns", "max_tokens", "wall_time")
    return Generation(
        text=last_text,
        seed=seed,
        finish_reason="length" if truncated else "stop",
        truncated=truncated,
        prompt_token_ids=prompt_ids,
        completion_token_ids=completion_ids,
        logprobs=logprobs,
        latency_ms=transcript["wall_ms"],
        input_tokens=sum(len(turn["prompt_token_ids"] or []) for turn in turns),
        output_tokens=sum(len(turn["completion_token_ids"] or []) for turn in turns),
    )
