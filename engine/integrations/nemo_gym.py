"""NeMo Gym: load a release's `nemo_gym` rows, check them against the Responses API request schema,
and score rollouts with Passband's verifiers as a NeMo Gym resources server.

A `nemo_gym` row is `{responses_create_params, expected_answer, verifier, task_key, version_hash, ...}`.
NeMo Gym validates `responses_create_params` as its copy of the OpenAI SDK's
`ResponseCreateParamsNonStreaming` with unknown fields forbidden; `check_row` applies that same SDK
type here, so a bad export fails before a training run does.

The resources server speaks NeMo Gym's HTTP protocol: `POST /seed_session` takes a row and starts
nothing (a Passband task has no state), `POST /verify` takes the row plus the policy's Responses API
`response` and answers the verify request with `reward` added. A verifier error or timeout has no
reward; NeMo Gym's field for that is `mask_sample` (the reward is not a valid measurement), sent with
reward 0.0 and `failure_kind` "verifier_error". A NeMo Gym agent, or verifiers' `nemo-gym` taskset
(`--env.taskset.task.resources-url`; it serves the row's tools over MCP, so it needs an MCP-capable
harness such as verifiers' `null`), points its resources URL at it:

    python -m engine.integrations.nemo_gym --port 8001
"""

from __future__ import annotations

import argparse
import functools
import json
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.integrations.release import ReleaseFileError, task_from_row
from engine.integrations.release import score as score_task

__all__ = ["check_row", "completion_of", "create_resources_app", "load_rows", "verify_request"]

VERIFIER_ERROR = "verifier_error"


@functools.cache
def _request_schema():
    """The SDK's request type, its field names, and one TypeAdapter for it (kept alive: the lazily
    validated Iterable fields it returns refer back to it)."""
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
    from pydantic import TypeAdapter

    schema = ResponseCreateParamsNonStreaming
    return frozenset(typing.get_type_hints(schema)), TypeAdapter(schema)


def _materialize(value: Any) -> Any:
    # pydantic validates Iterable[...] fields lazily; consuming them runs the item validation.
    if isinstance(value, Mapping):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_materialize(item) for item in value]
    if isinstance(value, Iterator):
        return [_materialize(item) for item in value]
    return value


def check_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A nemo_gym row with its JSON text columns decoded, its `responses_create_params` checked against
    the Responses API request type (unknown fields refused, as NeMo Gym does). Raises ValueError."""
    from pydantic import ValidationError

    row = dict(row)
    for column in ("responses_create_params", "verifier"):
        if isinstance(row.get(column), str):
            row[column] = json.loads(row[column])
    params = row.get("responses_create_params")
    if not isinstance(params, Mapping):
        raise ValueError("responses_create_params: missing, or not an object")
    fields, adapter = _request_schema()
    unknown = sorted(set(params) - fields)
    if unknown:
        raise ValueError(f"responses_create_params: unknown fields {unknown}")
    try:
        _materialize(adapter.validate_python(params))
    except ValidationError as error:
        raise ValueError(f"responses_create_params: {error}") from None
    task_from_row(row)  # the Passband columns the verifier needs
    return row


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a `nemo_gym` export (.jsonl or .parquet), checked; ReleaseFileError names the bad line."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    checked = []
    for number, row in enumerate(rows, start=1):
        try:
            checked.append(check_row(row))
        except (KeyError, ValueError) as error:
            raise ReleaseFileError(f"{path}, row {number}: {error}") from None
    return checked


def completion_of(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Responses API response's output as chat messages: one assistant message carrying the output
    text and any function calls (as Chat Completions tool calls), then each function call's output."""
    text: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for item in response.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            text.extend(part.get("text", "") for part in item.get("content") or [] if part.get("type") == "output_text")
        elif kind == "function_call":
            tool_calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
                }
            )
        elif kind == "function_call_output":
            results.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output", "")})
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return [message, *results]


def verify_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """NeMo Gym's verify: the request (the row and the policy's `response`) echoed with `reward`,
    `mask_sample`, `failure_kind` and the Passband verdict (`outcome`, `detail`, `latency_ms`)."""
    row = check_row({key: value for key, value in body.items() if key != "response"})
    verdict = score_task(task_from_row(row), completion=completion_of(body.get("response") or {}))
    undecided = verdict.reward is None
    return {
        **body,
        "responses_create_params": row["responses_create_params"],
        "reward": 0.0 if undecided else verdict.reward,
        "mask_sample": undecided,
        "failure_kind": VERIFIER_ERROR if undecided else None,
        "failure_reason": f"{verdict.outcome}: {verdict.detail}" if undecided else None,
        "outcome": verdict.outcome,
        "detail": verdict.detail,
        "latency_ms": verdict.latency_ms,
    }


def create_resources_app():
    """A FastAPI app with NeMo Gym's resources-server endpoints, scoring with Passband's verifiers."""
    from fastapi import Body, FastAPI, HTTPException
    from fastapi.concurrency import run_in_threadpool

    app = FastAPI(title="Passband NeMo Gym resources server")

    @app.post("/seed_session")
    async def seed_session(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        try:
            check_row(body)
        except (KeyError, ValueError) as error:
            raise HTTPException(status_code=422, detail=str(error)) from None
        return {}

    @app.post("/verify")
    async def verify(body: dict[str, Any] = Body(...)) -> dict[str, Any]:
        try:
            # Verifiers may block (code runs in a sandboxed process): off the event loop.
            return await run_in_threadpool(verify_request, body)
        except (KeyError, ValueError) as error:
            raise HTTPException(status_code=422, detail=str(error)) from None

    return app


def main(argv: Sequence[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Passband's verifiers as a NeMo Gym resources server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    uvicorn.run(create_resources_app(), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
