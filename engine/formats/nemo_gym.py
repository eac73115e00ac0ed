"""NeMo Gym: `responses_create_params` (input, and tools for tool tasks, as Responses API function tools);
verifier fields top-level."""

from __future__ import annotations

from typing import Any

from engine.formats.format import ExportFormat, calibration_of


def responses_tool(tool: dict) -> dict:
    """A Chat Completions tool schema (`{"type": "function", "function": {...}}`) as a Responses API
    function tool (`{"type": "function", "name", "parameters", "strict", ...}`), the shape NeMo Gym
    validates `responses_create_params.tools` against. Other tools pass through unchanged."""
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, dict):
        return tool
    flat = {"type": "function", "name": function["name"], "parameters": function.get("parameters")}
    if function.get("description"):
        flat["description"] = function["description"]
    # Chat Completions defaults to non-strict; the Responses API to strict: keep the task's meaning.
    flat["strict"] = bool(function.get("strict", False))
    return flat


def chat_tool(tool: dict) -> dict:
    """The inverse of responses_tool: a Responses API function tool as a Chat Completions tool schema."""
    if tool.get("type") != "function" or "function" in tool or "name" not in tool:
        return tool
    function = {key: tool[key] for key in ("name", "description", "parameters") if tool.get(key) is not None}
    if tool.get("strict"):  # non-strict is the Chat Completions default
        function["strict"] = True
    return {"type": "function", "function": function}


def nemo_gym_fields(record: dict) -> dict:
    """`responses_create_params` ({input, tools}), the expected answer, the verifier, key, environment, hash."""
    params: dict[str, Any] = {"input": record["prompt"]}
    if record.get("tools"):
        params["tools"] = [responses_tool(tool) for tool in record["tools"]]
    return {
        "responses_create_params": params,
        "expected_answer": record["answer"],
        "verifier": record["verifier"],
        "task_key": record["task_key"],
        "environment": record["environment"],
        "version_hash": record["version_hash"],
        "calibration": calibration_of(record),
    }


FORMAT = ExportFormat(
    name="nemo_gym",
    description="NeMo Gym: `responses_create_params` (JSON text: `input` and Responses API tools) and the "
    "verifier columns.",
    fields=nemo_gym_fields,
    columns=(
        ("responses_create_params", "text"),
        ("expected_answer", "text"),
        ("verifier", "text"),
        ("task_key", "text"),
        ("environment", "text"),
        ("version_hash", "text"),
        ("calibration", "calibration"),
    ),
    json_fields=("responses_create_params", "verifier"),
)
