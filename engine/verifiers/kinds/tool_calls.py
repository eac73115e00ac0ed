"""``tool_calls``: the model called the expected functions with the expected arguments.

Config::

    {"kind": "tool_calls",
     "calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],  # default: the task's
                                          # answer, parsed the same way as a completion
     "ordered": true,                     # calls must come in this order
     "arguments": "exact",                # "exact" | "subset" (expected arguments must be present
                                          #  and equal; extra arguments allowed)
     "allow_extra_calls": false}          # other calls besides the expected ones are tolerated

The completion may be: a list of OpenAI-style tool calls
(``{"type": "function", "function": {"name": ..., "arguments": "<json text>"}}``) or of
``{"name": ..., "arguments": {...}}``; an assistant message with ``tool_calls``; a list of chat
messages (tool calls of all assistant messages, in order); or text holding any of those as
JSON, or Hermes-style ``<tool_call>{...}</tool_call>`` blocks. Arguments given as JSON text are
parsed; arguments that are not valid JSON fail the completion.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
)
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.kinds.json import json_equal
from engine.verifiers.text import (
    is_chat_message,
    is_chat_messages,
    parse_json_value,
    tag_contents,
)

KIND = "tool_calls"
ARGUMENT_MODES = ("exact", "subset")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    def describe(self) -> str:
        arguments = ", ".join(f"{key}={json.dumps(value)}" for key, value in self.arguments.items())
        return shorten(f"{self.name}({arguments})", 100)


@dataclass(frozen=True)
class ToolCallsConfig:
    calls: tuple[ToolCall, ...] | None
    ordered: bool
    arguments: str
    allow_extra_calls: bool


class MalformedCalls(ValueError):
    """The completion's tool calls cannot be read; the message says why."""


def parse_config(raw: dict[str, Any]) -> ToolCallsConfig:
    reader = ConfigReader(raw, kind=KIND)
    raw_calls = reader.value("calls", None)
    calls = None
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise VerifierConfigError("calls", 'must be a list of {"name": ..., "arguments": {...}} objects')
        try:
            calls = tuple(read_calls(raw_calls))
        except MalformedCalls as error:
            raise VerifierConfigError("calls", str(error)) from None
    config = ToolCallsConfig(
        calls=calls,
        ordered=reader.boolean("ordered", True),
        arguments=reader.string("arguments", "exact", choices=ARGUMENT_MODES),
        allow_extra_calls=reader.boolean("allow_extra_calls", False),
    )
    reader.finish()
    return config


def read_calls(value: Any) -> list[ToolCall]:
    """Tool calls from any of the accepted shapes; raises MalformedCalls."""
    if isinstance(value, str):
        blocks = [block.strip() for block in tag_contents(value, "<tool_call>", "</tool_call>")]
        if blocks:
            calls = []
            for block in blocks:
                ok, parsed = parse_json_value(block, extract=False)
                if not ok:
                    raise MalformedCalls(f"<tool_call> block is not JSON: {shorten(block, 60)!r}")
                calls += read_calls(parsed)
            return calls
        if not value.strip():
            return []
        ok, parsed = parse_json_value(value, extract=True)
        if not ok:
            raise MalformedCalls(f"no tool calls found in text {shorten(value, 60)!r}")
        return read_calls(parsed)
    if is_chat_messages(value):
        calls = []
        for message in value:
            if message.get("role") == "assistant":
                calls += read_calls(message.get("tool_calls") or [])
        return calls
    if is_chat_message(value):
        return read_calls(value.get("tool_calls") or [])
    if isinstance(value, Mapping):
        if "tool_calls" in value:
            return read_calls(value["tool_calls"] or [])
        return [_read_one(value)]
    if isinstance(value, list):
        return [_read_one(item) for item in value]
    raise MalformedCalls(f"expected tool calls, got {type(value).__name__}")


def _read_one(item: Any) -> ToolCall:
    if not isinstance(item, Mapping):
        raise MalformedCalls(f"a tool call must be an object, got {shorten(json.dumps(item, default=str), 60)}")
    function = item["function"] if isinstance(item.get("function"), Mapping) else item
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise MalformedCalls(f"tool call without a name: {shorten(json.dumps(item, default=str), 60)}")
    arguments = function.get("arguments", function.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise MalformedCalls(f"arguments of {name} are not valid JSON: {shorten(arguments, 60)!r}") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise MalformedCalls(f"arguments of {name} must be an object")
    return ToolCall(name=name, arguments=dict(arguments))


def _matches(expected: ToolCall, actual: ToolCall, mode: str) -> bool:
    if expected.name != actual.name:
        return False
    if mode == "exact":
        return json_equal(expected.arguments, actual.arguments)
    return all(
        key in actual.arguments and json_equal(value, actual.arguments[key])
        for key, value in expected.arguments.items()
    )


def _match_unordered(expected: list[ToolCall], actual: list[ToolCall], mode: str) -> list[int | None]:
    """Maximum bipartite matching (Kuhn): for each expected call, the index of its actual call."""
    owner: dict[int, int] = {}

    def assign(index: int, seen: set[int]) -> bool:
        for candidate, call in enumerate(actual):
            if candidate in seen or not _matches(expected[index], call, mode):
                continue
            seen.add(candidate)
            if candidate not in owner or assign(owner[candidate], seen):
                owner[candidate] = index
                return True
        return False

    for index in range(len(expected)):
        assign(index, set())
    result: list[int | None] = [None] * len(expected)
    for candidate, index in owner.items():
        result[index] = candidate
    return result


def check(config: ToolCallsConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    if config.calls is not None:
        expected = list(config.calls)
    else:
        if answer is None:
            raise VerifierConfigError("calls", "give the expected calls in config 'calls' or as the task's answer")
        try:
            expected = read_calls(answer)
        except MalformedCalls as error:
            return errored(f"reference answer: {error}")
    try:
        actual = read_calls(completion)
    except MalformedCalls as error:
        return failed(str(error))
    if not actual and expected:
        return failed("no tool calls")
    if not config.allow_extra_calls and len(actual) != len(expected):
        return failed(
            f"expected {len(expected)} calls, got {len(actual)}: {', '.join(call.describe() for call in actual)}"
        )
    if config.ordered:
        position = 0
        for number, wanted in enumerate(expected, start=1):
            if config.allow_extra_calls:
                while position < len(actual) and not _matches(wanted, actual[position], config.arguments):
                    position += 1
                if position == len(actual):
                    return failed(f"expected call {number} {wanted.describe()} not found in order")
            elif not _matches(wanted, actual[position], config.arguments):
                return failed(f"call {number}: expected {wanted.describe()}, got {actual[position].describe()}")
            position += 1
    else:
        assignment = _match_unordered(expected, actual, config.arguments)
        missing = [expected[index] for index, found in enumerate(assignment) if found is None]
        if missing:
            return failed(
                f"no call matches {missing[0].describe()}"
                + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else "")
            )
    return passed(
        f"{len(expected)} expected calls made" + (f" ({len(actual)} in total)" if len(actual) != len(expected) else "")
    )


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    batchable=True,
    exports=KindExports(),
    examples=(
        KindExample(
            {"kind": KIND},
            passing=[{"name": "get_weather", "arguments": {"city": "Paris"}}],
            failing=[{"name": "get_weather", "arguments": {"city": "Lyon"}}],
            answer='[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        ),
    ),
)
