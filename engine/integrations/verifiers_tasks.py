"""Tasks from a verifiers 0.4 taskset (``verifiers.v1``), scored by the taskset's own ``@vf.reward`` methods.

The taskset is read with verifiers' own loader (``vf.taskset_config_type``, ``vf.load_taskset``, iterating
the taskset), in the locked-down helper process of the ``verifiers_reward`` kind: a taskset's ``load()``
is its author's code, like its rewards, and runs nowhere else. Each row becomes a task in Passband's format
through a column mapping (engine/task_mapping.py) over the row's columns:

- the task's wire data (its ``TaskData`` fields: ``id``, ``name``, ``idx`` and the taskset's own, such
  as ``answer``),
- ``prompt``: the chat messages the model is shown (the task's system prompt, then its prompt),
- ``key``: the task's verifiers key (its durable id where the taskset gives one, else a content hash).

The default mapping is ``{"prompt": "{prompt}", "answer_column": "answer", "key_column": "key",
"key_prefix": "<taskset>/"}``; a taskset whose reference answer sits elsewhere (``solution`` with a
``#### 42`` ending) is read with a mapping that says so. The verifier is always ``verifiers_reward`` with
the task's wire data, so the rollout is scored by the very task the taskset loaded::

    loaded = taskset_rows("vf-word-arithmetic", args={"topics": ["travel"]})
    tasks, problems = taskset_tasks(loaded, mapping=None, reference_format="\\\\boxed{{answer}}")
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass, field
from typing import Any

from engine.task_format import LineProblem
from engine.task_mapping import ColumnMapping
from engine.verifiers.kinds import verifiers_reward

KIND = verifiers_reward.KIND
LOAD_TIMEOUT_SECONDS = 120.0


class TasksetError(ValueError):
    """A taskset that cannot be read or scored here; the message says which and why."""


@dataclass
class LoadedTaskset:
    """A taskset's rows as its loader yielded them, and its reward functions (name and weight)."""

    taskset: str
    args: dict[str, Any]
    rows: list[dict[str, Any]]
    rewards: list[dict[str, Any]] = field(default_factory=list)

    @property
    def source_name(self) -> str:
        """How problems name the taskset, as a file name names a file."""
        return f"verifiers taskset {self.taskset}"


def taskset_rows(
    taskset: str, *, args: dict[str, Any] | None = None, limit: int | None = None, timeout_seconds: float | None = None
) -> LoadedTaskset:
    """Read a taskset's rows (at most `limit`) with verifiers' own loader, in the helper process.
    Raises TasksetError when the taskset is not installed, refuses its args, fails to load, or has
    rewards that cannot run here (they need a runtime or a judge)."""
    if limit is not None and limit < 1:
        raise TasksetError(f"limit must be at least 1, got {limit}")
    args = dict(args or {})
    response = verifiers_reward.helper_call(
        {"op": "load", "taskset": taskset, "args": args, "limit": limit},
        timeout_seconds=timeout_seconds or LOAD_TIMEOUT_SECONDS,
    )
    if response.get("outcome") != "loaded":
        raise TasksetError(f"taskset {taskset!r}: {response.get('detail', 'could not be loaded')}")
    if response.get("problems"):
        raise TasksetError(f"taskset {taskset!r} cannot be scored by Passband: {'; '.join(response['problems'])}")
    if not response.get("rows"):
        raise TasksetError(f"taskset {taskset!r} loaded no tasks with args {args}")
    return LoadedTaskset(taskset=taskset, args=args, rows=response["rows"], rewards=response.get("rewards") or [])


def default_mapping(taskset: str) -> ColumnMapping:
    return ColumnMapping(
        prompt="{prompt}", answer_column="answer", key_column="key", key_prefix=f"{key_name(taskset)}/"
    )


def key_name(taskset: str) -> str:
    """The taskset's name as a key segment: a hub id's name without owner or version."""
    name = taskset.rsplit("/", 1)[-1].split("@", 1)[0]
    return re.sub(r"[^A-Za-z0-9._:-]", "-", name).lstrip("._:-") or "taskset"


def mapping_row(row: dict[str, Any]) -> dict[str, Any]:
    """The columns a mapping reads from one row: the task's data fields, its chat prompt and its key."""
    return {**row["data"], "prompt": row["prompt"], "key": row["key"]}


def package_version(taskset: str) -> str | None:
    """The installed version of the distribution that holds the taskset's module (read from its metadata,
    importing nothing), so a task records which rewards scored it."""
    module = key_name(taskset).replace("-", "_").lower()
    for distribution in importlib.metadata.packages_distributions().get(module, []):
        try:
            return f"{distribution} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def taskset_tasks(
    loaded: LoadedTaskset,
    *,
    mapping: ColumnMapping | None,
    reference_format: str = verifiers_reward.ANSWER_PLACEHOLDER,
    timeout_seconds: float | None = None,
) -> tuple[list[dict[str, Any]], list[LineProblem]]:
    """The rows as task objects in Passband's format, or the problems (each naming its row and field)."""
    mapping = mapping or default_mapping(loaded.taskset)
    where = loaded.source_name
    if mapping.verifier is not None:
        reason = "must be empty: a verifiers taskset is scored by its own rewards"
        return [], [LineProblem(where, 0, "mapping: verifier", reason)]
    problems = mapping.column_problems(list(mapping_row(loaded.rows[0])), filename=where)
    if problems:
        return [], problems
    version = package_version(loaded.taskset)
    tasks = []
    for number, row in enumerate(loaded.rows, start=1):
        task, row_problems = mapping.task_object(mapping_row(row), number=number, filename=where, unit="row")
        if task is None:
            problems += row_problems
            continue
        verifier: dict[str, Any] = {
            "kind": KIND,
            "taskset": loaded.taskset,
            "args": loaded.args,
            "data": row["data"],
            "reference_format": reference_format,
        }
        if timeout_seconds is not None:
            verifier["timeout_seconds"] = timeout_seconds
        task["verifier"] = verifier
        origin = {"taskset": loaded.taskset, "args": loaded.args, "idx": row["idx"], "key": row["key"]}
        if version:
            origin["package"] = version
        task["metadata"] = {**task.get("metadata", {}), "verifiers": origin}
        tasks.append(task)
    return tasks, problems
