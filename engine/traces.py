"""Training traces: a rollout as what a trainer learns from. Pure: no Django import.

A trace is one token sequence, concatenated exactly as it was sampled: the first prompt's ids, then
for each turn the ids the model sampled (loss mask 1, with their logprobs) and, between turns, the
ids of what the environment added (the template's text after the reply, the tool messages, the next
generation prompt: loss mask 0), each tokenized on its own. Nothing is re-tokenized from text: the
prompt and sampled ids are the backend's, stored on the rollout and in its episode transcript
(docs/episodes.md). `spans` say which part of the sequence is which.

A rollout that cannot be a trace (no token ids: capture `text_only`; no reward: the verifier
failed or timed out, the generation failed; an episode whose environment spans are unknown) is
still a row, with `trainable` false and `excluded` saying why; exports leave those out by default.

    trace = trace_of(record)     # record: rollout_record's keys (releases/traces.py reads them)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from engine import formats

TRACE_FILE_TYPES = ("jsonl", "parquet", "atif")
ATIF_VERSION = "ATIF-v1.4"
PROMPT, COMPLETION, OBSERVATION = "prompt", "completion", "observation"


def trace_of(record: dict[str, Any]) -> dict[str, Any]:
    """One rollout as a trace row. `record` holds the rollout's columns with token ids and logprobs
    unpacked (`prompt_token_ids`, `completion_token_ids`, `logprobs`, `episode`, `capture`,
    `logprob_source`, `prompt_ids_source`, `outcome`, `reward`, `detail`, ...) and `policy`, the
    probe model's identity (name, backend, model, file, revision)."""
    episode = record.get("episode")
    tokens = _episode_tokens(episode) if episode else _single_turn_tokens(record)
    excluded = _exclusion(record, tokens)
    return {
        "rollout_id": record["rollout_id"],
        "campaign": record["campaign"],
        "task_key": record["task_key"],
        "environment": record["environment"],
        "version_hash": record["version_hash"],
        "sample_index": record["sample_index"],
        "seed": record["seed"],
        "policy": record["policy"],
        "sampling": formats.json_text(record.get("sampling") or {}),
        "kind": "episode" if episode else "single_turn",
        "turns": len(episode["turns"]) if episode else 1,
        "token_ids": tokens["ids"] if tokens else None,
        "loss_mask": tokens["loss_mask"] if tokens else None,
        "logprobs": tokens["logprobs"] if tokens else None,
        "spans": tokens["spans"] if tokens else [],
        # Whether each turn's sampling context is exactly the trace up to that turn (always on the first
        # turn; on later turns when the server's own rendering of the conversation tokenized the same).
        "context_matches": tokens["context_matches"] if tokens else None,
        "logprob_source": record.get("logprob_source") or _turns_source(episode, "logprob_source"),
        "prompt_ids_source": record.get("prompt_ids_source") or "",
        "capture": _capture(record, tokens),
        "text": record.get("text") or "",
        "finish_reason": record.get("finish_reason") or "",
        "truncated": bool(record.get("truncated")),
        "outcome": record.get("outcome"),
        "reward": record.get("reward"),
        "verdict_detail": record.get("detail") or "",
        "trainable": not excluded,
        "excluded": excluded,
    }


def _turns_source(episode: dict[str, Any] | None, field: str) -> str:
    """An episode's turns' common `field` (logprob_source), for rows from before the rollout kept it."""
    values = {turn.get(field) or "" for turn in (episode or {}).get("turns") or []}
    return values.pop() if len(values) == 1 else ""


def _exclusion(record: dict[str, Any], tokens: dict[str, Any] | None) -> str:
    """Why a rollout is not a training trace; "" when it is one."""
    if record.get("pruned"):
        return "pruned: retention dropped its token ids"
    episode = record.get("episode")
    turns = (episode or {}).get("turns") or []
    if tokens is None and (not episode or any(turn.get("completion_token_ids") is None for turn in turns)):
        if not episode and record.get("completion_token_ids") is not None:
            return "no prompt token ids: the server gave none and has no tokenizer endpoint"
        return "capture text_only: the backend gave no token ids"
    if record.get("reward") is None:
        return f"no reward (outcome {record.get('outcome') or 'not judged'})"
    if tokens is None:
        return "episode turns cannot be joined: the environment's tokens between turns are unknown"
    return ""


def _capture(record: dict[str, Any], tokens: dict[str, Any] | None) -> str:
    """exact (ids and a logprob for each sampled id), ids_only, or text_only, for the whole trace (an
    episode's rollout row says text_only when its turns form no single sequence on the server)."""
    if tokens is None:
        return "text_only" if record.get("episode") else record.get("capture") or "text_only"
    return "exact" if tokens["logprobs"] is not None else "ids_only"


def _single_turn_tokens(record: dict[str, Any]) -> dict[str, Any] | None:
    prompt, completion = record.get("prompt_token_ids"), record.get("completion_token_ids")
    if prompt is None or completion is None:
        return None
    builder = _Builder()
    builder.add(PROMPT, prompt, turn=0)
    builder.add(COMPLETION, completion, turn=0, logprobs=record.get("logprobs"))
    builder.context_matches.append(True)
    return builder.result()


def _episode_tokens(episode: dict[str, Any]) -> dict[str, Any] | None:
    """The episode's turns joined into one sequence, or None when a turn has no ids or the
    environment's ids after a turn are unknown (neither recorded nor readable from the next prompt)."""
    turns = [turn for turn in episode.get("turns") or [] if not turn.get("error")]
    if not turns or any(
        turn.get("prompt_token_ids") is None or turn.get("completion_token_ids") is None for turn in turns
    ):
        return None
    builder = _Builder()
    builder.add(PROMPT, turns[0]["prompt_token_ids"], turn=0)
    for position, turn in enumerate(turns):
        if position > 0:
            environment = turns[position - 1].get("environment_token_ids")
            next_prompt = turn["prompt_token_ids"]
            extends = next_prompt[: len(builder.ids)] == builder.ids
            if environment is None and extends:
                environment = next_prompt[len(builder.ids) :]
            if environment is None:
                return None
            builder.add(OBSERVATION, environment, turn=position - 1)
            builder.context_matches.append(next_prompt == builder.ids)
        else:
            builder.context_matches.append(True)
        builder.add(COMPLETION, turn["completion_token_ids"], turn=position, logprobs=turn.get("logprobs"))
    return builder.result()


class _Builder:
    """The sequence, its loss mask, logprobs (None once a model span has none) and spans, as they grow."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] | None = []
        self.spans: list[dict[str, Any]] = []
        self.context_matches: list[bool] = []

    def add(self, kind: str, ids: list[int], *, turn: int, logprobs: list[float] | None = None) -> None:
        model = kind == COMPLETION
        start = len(self.ids)
        self.ids += ids  # ints already: unpacked arrays or JSON
        self.mask += [1 if model else 0] * len(ids)
        if self.logprobs is not None:
            if not model:
                self.logprobs += [0.0] * len(ids)
            elif logprobs is not None and len(logprobs) == len(ids):
                self.logprobs += logprobs
            else:  # ids_only: the sequence and mask stand; no logprobs for the trace
                self.logprobs = None
        self.spans.append({"kind": kind, "turn": turn, "start": start, "end": len(self.ids)})

    def result(self) -> dict[str, Any]:
        return {
            "ids": self.ids,
            "loss_mask": self.mask,
            "logprobs": self.logprobs,
            "spans": self.spans,
            "context_matches": self.context_matches,
        }


# -- ATIF (Harbor's Agent Trajectory Interchange Format) -------------------------------------------


def atif_trajectory(trace: dict[str, Any], *, messages: list[dict[str, Any]], episode: dict[str, Any] | None) -> dict:
    """A trace as an ATIF trajectory (Harbor's RFC 0001, v1.4): the prompt's messages as system and
    user steps, one agent step per turn with its tool calls, observations and per-turn token ids and
    logprobs in `metrics`; the reward, verdict, loss mask and spans under `extra`."""
    policy = trace["policy"]
    steps: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") in ("system", "user"):
            steps.append(
                {"step_id": len(steps) + 1, "source": message["role"], "message": _text(message.get("content"))}
            )
    turns = (episode or {}).get("turns") or []
    if episode is None:
        span = {s["kind"]: s for s in trace["spans"]}
        steps.append(_agent_step(len(steps) + 1, trace, text=trace["text"], turn=None, span=span))
    for turn in turns:
        steps.append(_agent_step(len(steps) + 1, trace, text=turn.get("text") or "", turn=turn, span=None))
    return {
        "schema_version": ATIF_VERSION,
        "session_id": f"passband-campaign-{trace['campaign']}-rollout-{trace['rollout_id']}",
        "agent": {
            "name": "passband-probe",
            "version": policy.get("revision") or policy.get("file") or "unversioned",
            "model_name": policy.get("model") or policy.get("name") or "",
            "extra": {"policy": policy},
        },
        "steps": steps,
        "notes": "Token ids and logprobs are the backend's own (never re-tokenized); the trainable "
        "sequence and loss mask are in extra.trace.",
        "final_metrics": {
            "total_prompt_tokens": sum(len(turn.get("prompt_token_ids") or []) for turn in turns)
            if turns
            else _span_length(trace, PROMPT),
            "total_completion_tokens": sum(trace["loss_mask"] or []),
            "total_steps": len(steps),
        },
        "extra": {
            "task_key": trace["task_key"],
            "environment": trace["environment"],
            "version_hash": trace["version_hash"],
            "reward": trace["reward"],
            "outcome": trace["outcome"],
            "verdict_detail": trace["verdict_detail"],
            "trainable": trace["trainable"],
            "excluded": trace["excluded"],
            "logprob_source": trace["logprob_source"],
            "trace": {key: trace[key] for key in ("token_ids", "loss_mask", "spans", "context_matches")},
        },
    }


def _agent_step(step_id: int, trace: dict, *, text: str, turn: dict | None, span: dict | None) -> dict[str, Any]:
    step: dict[str, Any] = {"step_id": step_id, "source": "agent", "message": text}
    metrics: dict[str, Any] = {}
    if turn is not None:
        prompt_ids, completion_ids, logprobs = (
            turn.get("prompt_token_ids"),
            turn.get("completion_token_ids"),
            turn.get("logprobs"),
        )
        calls = turn.get("tool_calls") or []
        if calls:
            step["tool_calls"] = [
                {
                    "tool_call_id": call["id"],
                    "function_name": call["name"] or "invalid",
                    "arguments": call["parsed"] if isinstance(call.get("parsed"), dict) else {},
                }
                for call in calls
            ]
            results = [
                {"source_call_id": observation["tool_call_id"], "content": observation["content"]}
                for observation in turn.get("observations") or []
            ]
            step["observation"] = {"results": results}
            step["extra"] = {"raw_arguments": [call["arguments"] for call in calls]}
    else:
        ids = trace["token_ids"] or []
        prompt_ids = ids[span[PROMPT]["start"] : span[PROMPT]["end"]] if span and PROMPT in span else None
        completion_ids = (
            ids[span[COMPLETION]["start"] : span[COMPLETION]["end"]] if span and COMPLETION in span else None
        )
        logprobs = None
        if span and COMPLETION in span and trace["logprobs"] is not None:
            logprobs = trace["logprobs"][span[COMPLETION]["start"] : span[COMPLETION]["end"]]
    if prompt_ids is not None:
        metrics |= {"prompt_tokens": len(prompt_ids), "prompt_token_ids": list(prompt_ids)}
    if completion_ids is not None:
        metrics |= {"completion_tokens": len(completion_ids), "completion_token_ids": list(completion_ids)}
    if logprobs is not None:
        metrics["logprobs"] = list(logprobs)
    if metrics:
        step["metrics"] = metrics
    return step


def _span_length(trace: dict, kind: str) -> int:
    return sum(span["end"] - span["start"] for span in trace["spans"] if span["kind"] == kind)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


# -- files ---------------------------------------------------------------------------------------------


def arrow_schema():
    """The Parquet schema of traces."""
    import pyarrow as pa

    text = pa.string()
    return pa.schema(
        [
            ("rollout_id", pa.int64()),
            ("campaign", pa.int64()),
            ("task_key", text),
            ("environment", text),
            ("version_hash", text),
            ("sample_index", pa.int64()),
            ("seed", pa.int64()),
            (
                "policy",
                pa.struct([(name, text) for name in ("name", "backend", "model", "file", "revision")]),
            ),
            ("sampling", text),
            ("kind", text),
            ("turns", pa.int64()),
            ("token_ids", pa.list_(pa.int32())),
            ("loss_mask", pa.list_(pa.int8())),
            ("logprobs", pa.list_(pa.float32())),
            (
                "spans",
                pa.list_(pa.struct([("kind", text), ("turn", pa.int64()), ("start", pa.int64()), ("end", pa.int64())])),
            ),
            ("context_matches", pa.list_(pa.bool_())),
            ("logprob_source", text),
            ("prompt_ids_source", text),
            ("capture", text),
            ("text", text),
            ("finish_reason", text),
            ("truncated", pa.bool_()),
            ("outcome", text),
            ("reward", pa.float64()),
            ("verdict_detail", text),
            ("trainable", pa.bool_()),
            ("excluded", text),
        ]
    )


def write_traces(*, rows: Iterable[dict], file_type: str, path: Path | str) -> int:
    """Write trace rows (or, for `atif`, ATIF trajectories: one JSON document a line) to `path`
    through a temporary file renamed over it, so a failure leaves no partial file; returns the count."""
    if file_type not in TRACE_FILE_TYPES:
        raise formats.ExportFormatError(f"Unknown file type {file_type!r}; use one of {', '.join(TRACE_FILE_TYPES)}.")
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        if file_type == "parquet":
            count = _write_parquet(rows=rows, path=partial)
        else:
            with open(partial, "wb") as stream:
                count = formats.write_jsonl(rows=rows, stream=stream)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def _write_parquet(*, rows: Iterable[dict], path: Path, batch_size: int = 2000) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema()
    count = 0
    with pq.ParquetWriter(str(path), schema, compression="zstd") as writer:
        for batch in _batches(rows, batch_size):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count


def _batches(rows: Iterable[dict], size: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
