"""What is wrong with a list of OpenAI function schemas: the tools a plug-in, an MCP server or an imported task
offers. Each problem names the tool (index and name) and what to write instead."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import jsonschema

TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
FUNCTION_KEYS = {"name", "description", "parameters", "strict"}


def tool_schema_problems(schemas: Any) -> list[str]:
    """What is wrong with a list of OpenAI function schemas ([] when nothing is): each problem names the
    tool (index and name) and what to write instead. Used for plug-ins and for the tools of imported tasks."""
    if not isinstance(schemas, (list, tuple)) or not schemas:
        return ['TOOL_SCHEMAS must be a non-empty list of {"type": "function", "function": {...}} objects']
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, schema in enumerate(schemas):
        where = f"tool {index}"
        if (
            not isinstance(schema, dict)
            or schema.get("type") != "function"
            or not isinstance(schema.get("function"), dict)
        ):
            problems.append(f'{where}: must be {{"type": "function", "function": {{"name": ..., "parameters": ...}}}}')
            continue
        function = schema["function"]
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
            problems.append(f"{where}: function.name must be 1-64 letters, digits, '_' or '-', got {name!r}")
            continue
        where = f"tool {index} ({name})"
        if name in seen:
            problems.append(f"{where}: the name is already used by tool {seen[name]}; tool names must be unique")
        seen.setdefault(name, index)
        unknown = sorted(set(function) - FUNCTION_KEYS)
        if unknown:
            problems.append(f"{where}: unknown key function.{unknown[0]}; allowed: {', '.join(sorted(FUNCTION_KEYS))}")
        if "description" in function and not isinstance(function["description"], str):
            problems.append(f"{where}: function.description must be a string")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        problems.extend(_parameters_problems(parameters, where=where))
    return problems


@functools.lru_cache(maxsize=4096)
def _schema_error(parameters_json: str) -> tuple[str, str] | None:
    """Where and why a parameters schema (as canonical JSON) is not a valid JSON Schema; None when it is. Kept
    per process: an import offers the same few tool schemas on every task, and checking one against its
    metaschema costs about 10 ms."""
    parameters = json.loads(parameters_json)
    try:
        jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator).check_schema(
            parameters
        )
    except jsonschema.SchemaError as error:
        return "/".join(str(part) for part in error.absolute_path) or "(top)", error.message
    return None


def _parameters_problems(parameters: Any, *, where: str) -> list[str]:
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return [
            f'{where}: function.parameters must be a JSON Schema object, e.g. {{"type": "object", "properties": {{}}}}'
        ]
    invalid = _schema_error(json.dumps(parameters, sort_keys=True, default=repr))
    if invalid is not None:
        path, message = invalid
        return [f"{where}: function.parameters is not a valid JSON Schema at {path}: {message}"]
    properties = parameters.get("properties", {})
    missing = [key for key in parameters.get("required", []) if key not in properties]
    if missing:
        return [f"{where}: function.parameters.required names {', '.join(missing)}, which are not in its properties"]
    return []
