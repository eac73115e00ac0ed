"""verifiers tasksets, in a helper process: their rows read by verifiers' own loader, their rollouts scored
by their own ``@vf.reward`` methods (see helper_loop.py for the protocol).

A taskset is author code (its ``load()``, its rewards, any function its config plugs in), so it runs only
here, never in the web process or a Celery worker: under a memory cap, a deadline, an empty environment
and, once verifiers is imported, an audit hook that refuses processes, network, file writes and ctypes
(helper_loop's lockdown). The taskset's own package is imported after the lockdown, on its first request.

Requests (``op``), each with ``taskset`` (an installed taskset id), ``args`` (its config fields) and
``timeout_seconds``:

  {"op": "load", "limit": int | null}
      -> {"outcome": "loaded", "rows": [{"idx", "key", "name", "data", "prompt"}], "rewards": [...],
          "problems": [str]}   (each row's ``data`` is the task's wire data, ``prompt`` its chat messages)
  {"op": "score", "data": {...}, "prompt": [messages], "completion": [messages]}
      -> {"outcome": "scored", "rewards": {name: {"score", "weight"} | None}, "total": float}
       | {"outcome": "unreadable", "detail": str}   (a completion verifiers cannot read as chat messages)
Any other answer is {"outcome": "error" | "timeout", "detail": str}.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

if __package__:  # imported as engine.verifiers.verifiers_worker
    from engine.verifiers import helper_loop
else:  # the helper script (python -I): its sibling file, never another installed copy of the package
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import helper_loop  # type: ignore[no-redef]

_loaded: dict[str, Any] = {}


def _load() -> None:
    import verifiers.v1 as vf  # slow (seconds): once per helper, before it says it is ready
    from verifiers.v1.dialects.chat import message_to_wire, parse_message
    from verifiers.v1.graph import MessageNode

    _loaded.update(vf=vf, message_to_wire=message_to_wire, parse_message=parse_message, MessageNode=MessageNode)
    _loaded["loop"] = asyncio.new_event_loop()  # one loop for every score: a new one per request costs a millisecond
    # Stamped on each trace; left to its default, verifiers would run `git rev-parse` for every trace.
    _loaded["build"] = vf.VersionInfo(version=importlib.metadata.version("verifiers"))


class Refused(Exception):
    """A request this helper cannot serve; its message is the detail."""


@dataclass
class _Taskset:
    config: Any  # the taskset's TasksetConfig, validated
    task_class: Any  # its Task subclass
    problems: list[str] | None = None  # why its tasks cannot be scored here, once a task has been looked at


_tasksets: dict[str, _Taskset] = {}


def _taskset(request: dict) -> _Taskset:
    """The taskset's validated config and its Task class, as verifiers' own loader resolves them."""
    taskset_id, args = request.get("taskset"), request.get("args") or {}
    if not isinstance(taskset_id, str) or not isinstance(args, dict):
        raise Refused("a request needs a taskset id and an args object")
    cache_key = json.dumps([taskset_id, args], sort_keys=True)
    if cache_key not in _tasksets:
        vf = _loaded["vf"]
        try:
            config_type = vf.taskset_config_type(taskset_id)
        except ModuleNotFoundError as error:
            raise Refused(f"taskset {taskset_id!r} is not installed where Passband runs: {error}") from error
        try:
            config = config_type.model_validate({**args, "id": taskset_id})
        except ValueError as error:  # pydantic's ValidationError: names each field
            raise Refused(f"taskset {taskset_id!r} refused its args: {_short(error, 400)}") from error
        _tasksets[cache_key] = _Taskset(config=config, task_class=vf.task_type(taskset_id))
    return _tasksets[cache_key]


def _needs_runtime(function) -> bool:
    """verifiers' own rule: a reward with a `runtime` parameter and no default is skipped without a runtime."""
    parameter = inspect.signature(function).parameters.get("runtime")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _scoring_problems(task) -> list[str]:
    """Why this task cannot be scored here, where a rollout is a finished chat with no runtime or judge."""
    problems = []
    if getattr(task, "NEEDS_CONTAINER", False):
        problems.append(f"{type(task).__name__} needs a container (NEEDS_CONTAINER)")
    for function in task.hooks("reward"):
        if _needs_runtime(function):
            problems.append(f"reward {function.__name__!r} needs a runtime (a sandbox the task ran in)")
    if task.config.judges:
        problems.append("the task config plugs judges, which call a model (use Passband's llm_judge kind)")
    return problems


def _wire_prompt(data) -> list[dict]:
    message_to_wire = _loaded["message_to_wire"]
    messages = [{"role": "system", "content": data.system_prompt}] if data.system_prompt else []
    if isinstance(data.prompt, str):
        messages.append({"role": "user", "content": data.prompt})
    else:
        messages.extend(message_to_wire(message) for message in data.prompt or [])
    return messages


def load(request: dict) -> dict:
    vf = _loaded["vf"]
    taskset = vf.load_taskset(_taskset(request).config)
    limit = request.get("limit")
    if limit is not None:
        taskset = taskset.take(int(limit))
    elif not taskset.bounded:
        raise Refused(f"taskset {request['taskset']!r} is infinite: give a limit")
    rows: list[dict] = []
    rewards: list[dict] = []
    problems: list[str] = []
    tasks = iter(taskset)
    while True:
        try:
            task = next(tasks)
        except StopIteration:
            break
        except Exception as error:  # noqa: BLE001 - the taskset's load(): say where it stopped
            raise Refused(
                f"load() raised at row {len(rows) + 1}: {type(error).__name__}: {_short(error, 300)}"
            ) from error
        if not rows:
            rewards = [
                {"name": function.__name__, "weight": getattr(function, "_vf_weight", 1.0)}
                for function in task.hooks("reward")
            ]
            problems = _scoring_problems(task)
            if type(taskset).toolsets(taskset.config) or task.toolsets(task.config):
                problems.append("its tasks use verifiers toolsets (tool servers), which Passband's probe does not run")
        data = task.data
        rows.append(
            {
                "idx": data.idx,
                "key": task.key,
                "name": data.name,
                "data": data.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
                "prompt": _wire_prompt(data),
            }
        )
    return {"outcome": "loaded", "rows": rows, "rewards": rewards, "problems": problems}


def _trace(task, prompt: list, completion: list):
    """A finished single-agent trace: the prompt's messages, then the completion's (assistant turns sampled)."""
    vf, parse_message, message_node = _loaded["vf"], _loaded["parse_message"], _loaded["MessageNode"]
    nodes: list[Any] = []
    for message, sampled in [(m, False) for m in prompt] + [(m, m.get("role") == "assistant") for m in completion]:
        parent = len(nodes) - 1 if nodes else None
        nodes.append(message_node(parent=parent, message=parse_message(message), sampled=sampled))
    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        verifiers=_loaded["build"],
        nodes=nodes,
        is_completed=True,
        ok=True,
    )


def score(request: dict) -> dict:
    taskset = _taskset(request)
    task_class = taskset.task_class
    try:
        data = task_class.data_type().model_validate(request.get("data") or {})
    except ValueError as error:
        raise Refused(f"the task's data no longer fits {task_class.__name__}: {_short(error, 300)}") from error
    task = task_class(data, taskset.config.task)
    if taskset.problems is None:  # a task's rewards come from its class and config, not its data: checked once
        taskset.problems = _scoring_problems(task)
    if taskset.problems:
        raise Refused("; ".join(taskset.problems))
    try:
        trace = _trace(task, request.get("prompt") or [], request.get("completion") or [])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        return {"outcome": "unreadable", "detail": f"verifiers cannot read the completion: {_short(error, 160)}"}
    _loaded["loop"].run_until_complete(task.score(trace))
    rewards = {
        name: None if reward is None else {"score": reward.score, "weight": reward.weight}
        for name, reward in trace.rewards.items()
    }
    return {"outcome": "scored", "rewards": rewards, "total": trace.reward}


def _short(error: BaseException, limit: int) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def evaluate(request: dict) -> dict:
    """Answer one request. Raises nothing but the BaseExceptions used to interrupt it."""
    operations = {"load": load, "score": score}
    operation = operations.get(str(request.get("op")))
    if operation is None:
        return {"outcome": "error", "detail": f"unknown op {request.get('op')!r}"}
    try:
        response = operation(request)
    except Refused as error:
        return {"outcome": "error", "detail": str(error)}
    except (RecursionError, MemoryError) as error:
        return {"outcome": "error", "detail": f"the taskset ran out of room ({type(error).__name__})"}
    except Exception as error:  # noqa: BLE001 - author code: anything it raises is the taskset's error
        return {"outcome": "error", "detail": f"{type(error).__name__}: {_short(error, 300)}"}
    return response  # a score that is not a finite number is the caller's to refuse, by reward


def _timed_out(request: dict) -> dict:
    # The interrupted score may have left tasks on the loop: they must never run again, so the loop is dropped.
    _loaded["loop"] = asyncio.new_event_loop()
    seconds = float(request.get("timeout_seconds", 5))
    return {"outcome": "timeout", "detail": f"the taskset's {request.get('op')} took over {seconds:g}s"}


def main() -> None:
    helper_loop.serve(evaluate, load=_load, timed_out=_timed_out, lockdown=True)


if __name__ == "__main__":
    main()
