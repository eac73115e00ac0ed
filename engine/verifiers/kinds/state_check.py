"""``state_check``: the final state of a tool environment's database is what the task asks for.

Judges what the agent did to the world, never what it said. Config::

    {"kind": "state_check",
     "environment": "backoffice",          # an installed environment plug-in (docs/environments.md)
     "seed": 17,                           # the world every attempt starts from
     "checks": [
        {"table": "deals", "where": {"id": 4}, "expect": {"stage": "won"}},
                                           # exactly one row matches `where`; its fields equal `expect`
        {"table": "contacts", "where": {"customer_id": 3, "name": "Ada Lee"}, "count": 1},
                                           # this many rows match `where` (0: none may)
        {"unchanged": ["policies", "customers"]},
                                           # these tables are exactly as the seed built them
        {"check": "stock_moved", "arguments": {"sku": "SKU-101", "delta": 5}}],
                                           # one of the plug-in's own STATE_CHECKS holds
     "max_replay_calls": 50}               # see "completion" below

Comparison: strings ignore case and surrounding whitespace; numbers (and numeric strings) are
equal within 0.01. A plug-in's own check is `function(state, **arguments)` returning None when it
holds and the reason when it does not; it reads the final state as JSON data, in this process.

The completion is the episode transcript (a JSON object with ``final_state``, as rollouts of tool
tasks store it), a bare state ``{table: [rows]}``, or tool calls in any shape the ``tool_calls``
kind reads (a list of calls, chat messages, ``<tool_call>`` text). Tool calls are replayed on a
fresh world of (environment, seed), at most ``max_replay_calls`` of them, in one sandbox run
(``world.replay_state``: the calls may be model-written): this is how an author's reference answer
(the list of calls that solves the task) is audited, and an empty completion leaves the initial
state, which must fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.episodes import plugins, world
from engine.verifiers.base import (
    Check,
    ConfigReader,
    VerifierConfigError,
    errored,
    failed,
    passed,
    shorten,
    timed_out,
)
from engine.verifiers.kind import KindExports, VerifierKind
from engine.verifiers.kinds.tool_calls import MalformedCalls, read_calls

KIND = "state_check"
NUMBER_TOLERANCE = 0.01


@dataclass(frozen=True)
class StateCheckConfig:
    environment: str
    seed: int
    checks: tuple[dict[str, Any], ...]
    max_replay_calls: int


def parse_config(raw: dict[str, Any]) -> StateCheckConfig:

    reader = ConfigReader(raw, kind=KIND)
    environment = reader.string("environment", non_empty=True)
    try:
        plugin = world.environment(environment)
    except plugins.UnknownEnvironment as error:
        raise VerifierConfigError("environment", str(error)) from None
    checks = reader.list_of_mappings("checks", non_empty=True)
    for index, item in enumerate(checks):
        _validate_check(item, index=index, tables=plugin.tables, own_checks=plugin.state_checks)
    config = StateCheckConfig(
        environment=environment,
        seed=reader.integer("seed", minimum=0),
        checks=tuple(checks),
        max_replay_calls=reader.integer("max_replay_calls", 50, minimum=0, maximum=1000),
    )
    reader.finish()
    return config


def _validate_check(item: dict[str, Any], *, index: int, tables: tuple[str, ...], own_checks: tuple[str, ...]) -> None:
    field = f"checks[{index}]"
    if "check" in item:
        if item["check"] not in own_checks:
            offered = ", ".join(own_checks) or "none"
            raise VerifierConfigError(field, f"unknown check {item['check']!r}; this environment's checks: {offered}")
        if set(item) - {"check", "arguments"} or not isinstance(item.get("arguments", {}), Mapping):
            raise VerifierConfigError(field, 'a plug-in check is {"check": name, "arguments": {...}}')
        return
    if "unchanged" in item:
        unchanged = item["unchanged"]
        if set(item) != {"unchanged"} or not isinstance(unchanged, list) or not all(t in tables for t in unchanged):
            raise VerifierConfigError(field, f"'unchanged' takes a list of tables out of {', '.join(tables)}")
        return
    if item.get("table") not in tables:
        raise VerifierConfigError(field, f"'table' must be one of {', '.join(tables)}, got {item.get('table')!r}")
    if not isinstance(item.get("where", {}), Mapping):
        raise VerifierConfigError(field, "'where' must be an object of field -> value")
    has_expect, has_count = "expect" in item, "count" in item
    if has_expect == has_count:
        raise VerifierConfigError(field, "give exactly one of 'expect' (an object) or 'count' (an integer)")
    if has_expect and not isinstance(item["expect"], Mapping):
        raise VerifierConfigError(field, "'expect' must be an object of field -> value")
    if has_count and (isinstance(item["count"], bool) or not isinstance(item["count"], int) or item["count"] < 0):
        raise VerifierConfigError(field, "'count' must be an integer >= 0")
    unknown = set(item) - {"table", "where", "expect", "count"}
    if unknown:
        raise VerifierConfigError(field, f"unknown key {sorted(unknown)[0]!r}")


def values_equal(expected: Any, actual: Any) -> bool:
    """The comparison of the module docstring."""
    expected_number, actual_number = _number(expected), _number(actual)
    if expected_number is not None and actual_number is not None:
        return math.isclose(expected_number, actual_number, rel_tol=0.0, abs_tol=NUMBER_TOLERANCE)
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.strip().casefold() == actual.strip().casefold()
    return expected == actual


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def matching_rows(state: Mapping[str, Any], table: str, where: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The rows of `table` in `state` whose fields equal every value of `where` (the comparison above)."""
    return [row for row in state.get(table) or [] if isinstance(row, Mapping) and _matches(row, where)]


def _matches(row: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    return all(key in row and values_equal(value, row[key]) for key, value in where.items())


def _is_state(value: Any, tables: tuple[str, ...]) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(key in tables and isinstance(rows, list) for key, rows in value.items())
    )


class _ToolTimeout(Exception):
    pass


class _PluginCheckCrashed(Exception):
    pass


def final_state(config: StateCheckConfig, completion: Any) -> tuple[dict[str, Any] | None, str]:
    """The state to judge, and why it could not be had ("" when it could)."""

    tables = world.environment(config.environment).tables
    if isinstance(completion, Mapping) and "final_state" in completion:
        if completion.get("stop_reason") == "tool_timeout":
            raise _ToolTimeout("a tool call of the episode timed out")
        for key, wanted in (("environment", config.environment), ("seed", config.seed)):
            if key in completion and completion[key] != wanted:
                return None, f"the episode ran in {key} {completion[key]!r}, the task wants {wanted!r}"
        state = completion["final_state"]
        if not _is_state(state, tables):
            return None, "the episode has no final state (it did not run to the end)"
        return dict(state), ""
    if _is_state(completion, tables):
        return dict(completion), ""
    calls = read_calls(completion)  # raises MalformedCalls
    if len(calls) > config.max_replay_calls:
        raise MalformedCalls(f"{len(calls)} tool calls to replay, more than max_replay_calls={config.max_replay_calls}")
    replayed = [{"name": call.name, "arguments": call.arguments} for call in calls]
    try:
        if not calls:  # the world as reset, read in its sandbox
            return world.initial_state(environment=config.environment, seed=config.seed), ""
        return world.replay_state(environment=config.environment, seed=config.seed, calls=replayed), ""
    except world.ReplayTimeout as error:
        raise _ToolTimeout(str(error)) from None
    except RuntimeError as error:
        return None, str(error)


def _own_check(config: StateCheckConfig, item: dict[str, Any], state: dict[str, Any]) -> Any:
    """Run one of the plug-in's STATE_CHECKS, in its sandbox; a crash is the verifier's failure (an error), not the
    agent's."""
    try:
        return world.run_state_check(
            environment=config.environment, check=item["check"], state=state, arguments=dict(item.get("arguments", {}))
        )
    except RuntimeError as error:  # plug-in code, run in its sandbox; the verdict says what broke
        raise _PluginCheckCrashed(f"the environment's check {item['check']} crashed: {error}") from None


def check(config: StateCheckConfig, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:

    try:
        state, problem = final_state(config, completion)
    except MalformedCalls as error:
        return failed(str(error))
    except _ToolTimeout as error:
        return timed_out(str(error))
    if state is None:
        return errored(problem)
    initial: dict[str, Any] | None = None
    for index, item in enumerate(config.checks):
        label = f"check {index + 1}"
        if "check" in item:
            try:
                why_not = _own_check(config, item, state)
            except _PluginCheckCrashed as error:
                return errored(f"{label}: {error}")
            if why_not is not None:
                return failed(f"{label} ({item['check']}): {shorten(str(why_not), 160)}")
            continue
        if "unchanged" in item:
            if initial is None:
                try:  # reset and read in the plug-in's sandbox
                    initial = world.initial_state(environment=config.environment, seed=config.seed)
                except RuntimeError as error:
                    return errored(f"{label}: the world's initial state could not be read: {error}")
            for table in item["unchanged"]:
                if state.get(table) != initial[table]:
                    return failed(f"{label}: table {table} was changed")
            continue
        table, where = item["table"], item.get("where", {})
        rows = matching_rows(state, table, where)
        described = f"{table} where {shorten(str(dict(where)), 80)}"
        if "count" in item:
            if len(rows) != item["count"]:
                return failed(f"{label}: {len(rows)} rows of {described}, expected {item['count']}")
            continue
        if len(rows) != 1:
            return failed(f"{label}: {len(rows)} rows of {described}, expected exactly 1")
        for key, value in item["expect"].items():
            if not values_equal(value, rows[0].get(key)):
                return failed(f"{label}: {described} has {key}={rows[0].get(key)!r}, expected {value!r}")
    return passed(f"all {len(config.checks)} state checks hold")


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    exports=KindExports(),
    examples_unavailable="judges an installed environment plug-in's world: each plug-in's own tasks are its examples",
)
