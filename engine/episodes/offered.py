"""Only the tools a task offers run, in every world: the one rule, for episodes and for replayed calls.

A task's `tools` (OpenAI function schemas) are what the model is offered. A world may hold more (a
plug-in package's admin tool, an MCP server's other tools): those never run for this task.

* Episodes: `engine.episodes.runner` refuses a call to a tool the episode was not offered before the
  world sees it (an `unknown_tool` observation saying so, counted under `not_offered`), whatever the
  world (plug-in, repository, MCP, OpenEnv).
* Completions that are tool calls rather than episodes (an author's reference answer, the audit's
  battery, a trainer's text) are replayed on a fresh world by some verifier kinds: `engine.verifiers.verify`
  fails one that calls a tool the task does not offer (`unoffered_problem`), before the kind runs, so
  the call is never replayed and never paid.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def offered_names(tools: Iterable[Any] | None) -> frozenset[str]:
    """The names of `tools` (OpenAI function schemas, or bare {"name"} objects)."""
    names = set()
    for tool in tools or ():
        if isinstance(tool, Mapping):
            inner = tool.get("function")
            function: Mapping[Any, Any] = inner if isinstance(inner, Mapping) else tool
            name = function.get("name")
            if isinstance(name, str):
                names.add(name)
    return frozenset(names)


def refusal(name: Any, offered: frozenset[str]) -> str:
    """The observation's error for a call to a tool that was not offered."""
    known = ", ".join(sorted(offered)) or "none"
    return f"the task does not offer the tool {name!r}; its tools are {known}"


def called_names(completion: Any) -> list[str] | None:
    """The tool names a completion calls: an episode transcript's calls (every turn's), or the calls of a
    completion the `tool_calls` kind reads (a list, chat messages, `<tool_call>` text). None when the
    completion holds no readable tool calls."""
    if isinstance(completion, Mapping) and isinstance(completion.get("turns"), list):
        return [
            str(call.get("name"))
            for turn in completion["turns"]
            if isinstance(turn, Mapping)
            for call in turn.get("tool_calls") or []
            if isinstance(call, Mapping) and call.get("name")
        ]
    from engine.verifiers.kinds.tool_calls import MalformedCalls, read_calls

    try:
        return [call.name for call in read_calls(completion)]
    except (MalformedCalls, TypeError, ValueError, RecursionError):
        return None


def unoffered_problem(completion: Any, tools: Iterable[Any] | None) -> str:
    """Why `completion` may not be paid because it calls a tool outside `tools` ("" when it calls none, or
    when `tools` is empty: a task on a remote server that lists none is offered all of the server's).
    An episode's refused calls ran nowhere, so an episode is judged on what it did; only a completion whose
    calls would be replayed is refused here."""
    offered = offered_names(tools)
    if not offered or (isinstance(completion, Mapping) and "turns" in completion):
        return ""
    names = called_names(completion) or []
    outside = sorted({name for name in names if name not in offered})
    if not outside:
        return ""
    return (
        f"calls {', '.join(outside)}, which the task does not offer (its tools: {', '.join(sorted(offered))}): "
        "a call to a tool the task does not offer never runs and is never paid"
    )
