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
(`tool_timeout`), when the backend fails (`generation_error`), or when the world says the episode is
over (`done`: a world whose `done` attribute turns true, as an OpenEnv server's does).

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
observations the model sees, and are counted in `transcript["counts"]`. Only the tools the episode was
offered (`tools`) run, whatever the world holds: a call to any other is refused here, before the world
sees it, as an `unknown_tool` observation, and counted under `counts["not_offered"]`
(engine/episodes/offered.py).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from engine.backends.base import Generation, SamplingParams
from engine.episodes.drivers import ParsedCall, driver_for, turn_seed
from engine.episodes.offered import offered_names, refusal
from engine.episodes.world import SandboxedWorld, World

TRANSCRIPT_VERSION = 1
OBSERVATION_STATUSES = ("ok", "malformed", "unknown_tool", "bad_arguments", "tool_error", "timeout")
STOP_REASONS = ("answered", "done", "max_turns", "max_tokens", "wall_time", "tool_timeout", "generation_error")


@dataclass(frozen=True)
class EpisodeLimits:
    """Bounds of one episode. Tokens count the model's completion tokens over all turns."""

    max_turns: int = 6
    max_completion_tokens: int = 2048
    wall_seconds: float = 300.0
    tool_seconds: float = 5.0


@dataclass
class Episode:
    transcript: dict[str, Any]
    generation: Generation


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
    driver = driver_for(backend, tools)
    world = world or SandboxedWorld(environment=environment, seed=world_seed, tool_seconds=limits.tool_seconds)
    play = _Play(history=driver.prepare(messages) if hasattr(driver, "prepare") else list(messages))
    play.offered = offered_names(tools)
    _play_turns(play, driver=driver, world=world, seed=seed, params=params, limits=limits, started=started)
    final_state = None
    if play.stop_reason not in ("tool_timeout", "generation_error"):
        try:
            final_state = world.state()
        except RuntimeError as state_error:
            play.error = f"could not read the final state: {state_error}"
    transcript = {
        "version": TRANSCRIPT_VERSION,
        "environment": environment,
        "seed": world_seed,
        "rollout_seed": seed,
        "backend": backend.name,
        "messages": play.history,
        "offered_tools": sorted(play.offered),
        "turns": play.turns,
        "counts": play.counts,
        "stop_reason": play.stop_reason,
        "error": play.error,
        "error_kind": play.error_kind,
        "wall_ms": round((time.perf_counter() - started) * 1000, 3),
        # How long the world took to be ready (a sandboxed reset, an MCP session opened): None when the
        # world was not reset ahead of the episode.
        "reset_ms": getattr(world, "reset_ms", None),
        "final_state": final_state,
    }
    transcript.update(flat_tokens(play.turns) if driver.prefix_consistent else {"tokens": None})
    # Whether the turns form one token sequence (each prompt extends the previous prompt and completion).
    transcript["prefix_consistent"] = transcript["tokens"] is not None
    return Episode(transcript=transcript, generation=_summary(transcript, seed=seed))


@dataclass
class _Play:
    """The episode so far: the conversation, the turns' records, the observation counts, why it stopped."""

    history: list[dict[str, Any]]
    turns: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    counts: dict[str, int] = dataclasses.field(
        default_factory=lambda: {status: 0 for status in OBSERVATION_STATUSES} | {"tool_calls": 0, "not_offered": 0}
    )
    offered: frozenset[str] = frozenset()
    stop_reason: str = "max_turns"
    error: str | None = None
    error_kind: str | None = None


def _play_turns(
    play: _Play, *, driver: Any, world: World, seed: int, params: SamplingParams, limits: EpisodeLimits, started: float
) -> None:
    """Turns until the model answers or a limit stops the episode; sets `play.stop_reason`."""
    used_tokens = 0
    for turn_index in range(limits.max_turns):
        if time.perf_counter() - started > limits.wall_seconds:
            play.stop_reason = "wall_time"
            return
        remaining = limits.max_completion_tokens - used_tokens
        if remaining <= 0:
            play.stop_reason = "max_tokens"
            return
        turn_params = dataclasses.replace(params, max_new_tokens=min(params.max_new_tokens, remaining))
        output = driver.turn(history=play.history, seed=turn_seed(seed, turn_index), params=turn_params)
        generation = output.generation
        turn = _turn_record(turn_index, generation)
        play.turns.append(turn)
        if generation.error is not None:
            play.stop_reason, play.error, play.error_kind = "generation_error", generation.error, generation.error_kind
            turn["error"] = generation.error
            return
        used_tokens += generation.output_tokens or len(generation.completion_token_ids or [])
        play.history.append(output.assistant_message)
        if not output.calls:
            play.stop_reason = "max_tokens" if generation.truncated else "answered"
            return
        added, timed_out = _run_calls(output.calls, world=world, turn=turn, counts=play.counts, offered=play.offered)
        play.history.extend(added)
        if timed_out:
            play.stop_reason = "tool_timeout"
            return
        if getattr(world, "done", False):
            # The environment ended the episode (an OpenEnv server's `done`): the model acts no more.
            play.stop_reason = "done"
            return
        # What the environment added before the next turn, tokenized on its own (training traces).
        turn["environment_token_ids"] = driver.observe(
            history=play.history, added=added, completion_ids=generation.completion_token_ids
        )


def _turn_record(turn_index: int, generation: Generation) -> dict[str, Any]:
    return {
        "index": turn_index,
        "seed": generation.seed,
        "prompt_token_ids": generation.prompt_token_ids,
        "completion_token_ids": generation.completion_token_ids,
        "logprobs": generation.logprobs,
        "logprob_source": generation.logprob_source,
        "prompt_ids_source": generation.prompt_ids_source,
        "text": generation.text,
        "finish_reason": generation.finish_reason,
        "latency_ms": round(generation.latency_ms, 3),
        "tool_calls": [],
        "observations": [],
        "environment_token_ids": None,
    }


def _run_calls(
    calls: list[ParsedCall], *, world: World, turn: dict[str, Any], counts: dict[str, int], offered: frozenset[str]
) -> tuple[list[dict[str, Any]], bool]:
    """Run one turn's tool calls in order, recording each call and observation in `turn`. Returns the
    `tool` messages for the conversation and whether a call timed out (the calls after it do not run).
    A call to a tool outside `offered` never reaches the world."""
    added: list[dict[str, Any]] = []
    for call in calls:
        counts["tool_calls"] += 1
        turn["tool_calls"].append(
            {"id": call.call_id, "name": call.name, "arguments": call.arguments_text, "parsed": call.arguments}
        )
        if call.problem:
            status, content, latency_ms = "malformed", json.dumps({"error": call.problem}), 0.0
        elif call.name not in offered:
            status, content, latency_ms = "unknown_tool", json.dumps({"error": refusal(call.name, offered)}), 0.0
            counts["not_offered"] += 1
        else:
            result = world.call(call.name, call.arguments)
            status, content, latency_ms = result.status, result.content, result.latency_ms
        counts[status] += 1
        turn["observations"].append(
            {
                "tool_call_id": call.call_id,
                "name": call.name,
                "status": status,
                "content": content,
                "latency_ms": round(latency_ms, 3),
            }
        )
        added.append({"role": "tool", "tool_call_id": call.call_id, "name": call.name or "invalid", "content": content})
        if status == "timeout":
            return added, True
    return added, False


def world_failure(transcript: Any) -> str:
    """What failed in the episode's world, named ("" when nothing did): a tool call past its time limit
    (stop reason `tool_timeout`). Such an episode is the world's outcome, never the model's attempt nor the
    verifier's error."""
    if not isinstance(transcript, dict) or transcript.get("stop_reason") != "tool_timeout":
        return ""
    timed_out = [
        observation.get("name")
        for turn in transcript.get("turns") or []
        for observation in turn.get("observations") or []
        if observation.get("status") == "timeout"
    ]
    name = timed_out[-1] if timed_out else "?"
    return f"tool {name} (world {transcript.get('environment', '?')}): the call ran past its time limit"


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
            environment = next_prompt[len(sequence) :]
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
        return Generation.failed(
            seed=seed,
            error=transcript["error"] or "generation failed",
            latency_ms=transcript["wall_ms"],
            kind="prompt_too_long" if transcript.get("error_kind") == "prompt_too_long" else "infrastructure",
        )
    tokens = transcript.get("tokens")
    prompt_ids = completion_ids = logprobs = None
    if tokens:
        prompt_ids = tokens["ids"][: tokens["prompt_length"]]
        completion_ids = tokens["ids"][tokens["prompt_length"] :]
        logprobs = tokens["logprobs"][tokens["prompt_length"] :]
    truncated = transcript["stop_reason"] in ("max_turns", "max_tokens", "wall_time")
    # Which distribution the logprobs describe and where the prompt ids came from: the turns', when they agree.
    sources = {(turn.get("logprob_source", ""), turn.get("prompt_ids_source", "")) for turn in turns}
    logprob_source, prompt_ids_source = sources.pop() if len(sources) == 1 else ("", "")
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
        logprob_source=logprob_source,
        prompt_ids_source=prompt_ids_source,
    )
