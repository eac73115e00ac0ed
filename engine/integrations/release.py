"""Read a Passband release file and score completions against its tasks. Pure: no Django import.

A release file is any export a release ships (`native`, `trl`, `verifiers` or `nemo_gym`, as JSONL or
Parquet); the format is recognised from its columns. Each row becomes a ReleaseTask with the fields
every trainer integration needs: the durable id (task key and version hash), the prompt as chat
messages, the reference answer, the verifier config and the tools (Chat Completions schemas).

    tasks = read_release("release-1-verifiers.parquet")
    verdict = score(tasks[0], completion="42")     # the very code that calibrated the task
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import formats
from engine.verifiers import Verdict, verify


class ReleaseFileError(ValueError):
    """A file that is not a Passband release export; the message names the file and, for a bad row, its line."""


@dataclass(frozen=True)
class ReleaseTask:
    """One task version of a release, as a trainer integration sees it."""

    task_key: str
    version_hash: str
    prompt: list[dict[str, Any]]
    answer: str | None
    verifier: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)
    environment: str | None = None
    calibration: dict[str, Any] | None = None
    quality_card: dict[str, Any] | None = None
    """The version's quality card (engine/quality_card.py); None in a file exported before cards."""

    @property
    def id(self) -> str:
        """`<task key>@<version hash>`: unique within a release and stable across releases.
        Task keys never contain `@`, so the id splits back unambiguously."""
        return f"{self.task_key}@{self.version_hash}"


def _json(value: Any) -> Any:
    # Parquet (and the trl and verifiers formats everywhere) carry object columns as JSON text.
    return json.loads(value) if isinstance(value, str) else value


def _messages(prompt: Any) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt or []]


def task_from_row(row: Mapping[str, Any]) -> ReleaseTask:
    """A ReleaseTask from one row of any export format; raises KeyError for a missing column."""
    if "responses_create_params" in row:  # nemo_gym
        params = _json(row["responses_create_params"])
        return ReleaseTask(
            task_key=row["task_key"],
            version_hash=row["version_hash"],
            prompt=_messages(params["input"]),
            answer=row.get("expected_answer"),
            verifier=_json(row["verifier"]),
            tools=[formats.chat_tool(tool) for tool in params.get("tools") or []],
            environment=row.get("environment"),
            calibration=row.get("calibration"),
            quality_card=_json(row.get("quality_card")),
        )
    if "info" in row:  # verifiers
        info = _json(row["info"])
        return ReleaseTask(
            task_key=row["task_key"],
            version_hash=row["version_hash"],
            prompt=_messages(row["prompt"]),
            answer=row.get("answer"),
            verifier=info["verifier"],
            tools=info.get("tools") or [],
            environment=row.get("task"),
            calibration=row.get("calibration"),
            quality_card=_json(row.get("quality_card")),
        )
    return ReleaseTask(  # native (key) or trl (task_key)
        task_key=row["key"] if "key" in row else row["task_key"],
        version_hash=row["version_hash"],
        prompt=_messages(row["prompt"]),
        answer=row.get("answer"),
        verifier=_json(row["verifier"]),
        tools=_json(row.get("tools")) or [],
        environment=row.get("environment"),
        calibration=row.get("calibration"),
        quality_card=_json(row.get("quality_card")),
    )


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for number, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield number, row
        return
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except ValueError as error:
                    raise ReleaseFileError(f"{path}, line {number}: not JSON ({error})") from None


def read_release(path: str | Path) -> list[ReleaseTask]:
    """Every task of a release file (.jsonl or .parquet, any export format), in file order.

    Raises ReleaseFileError naming the file and line when a row lacks a column the format needs.
    """
    path = Path(path)
    if path.suffix not in (".jsonl", ".parquet"):
        raise ReleaseFileError(f"{path}: a release file ends in .jsonl or .parquet")
    tasks = []
    for number, row in _rows(path):
        try:
            tasks.append(task_from_row(row))
        except (KeyError, TypeError, ValueError) as error:
            where = "row" if path.suffix == ".parquet" else "line"
            raise ReleaseFileError(f"{path}, {where} {number}: not a Passband export row ({error!r})") from None
    return tasks


def score(task: ReleaseTask, *, completion: str | list[Any] | dict[str, Any]) -> Verdict:
    """The task's own verifier on one completion (text, a chat message or a list of them).

    Out: the Verdict; its reward is None for an error or a timeout, which is no evidence either way.
    """
    return verify(verifier=task.verifier, completion=completion, answer=task.answer, prompt=task.prompt)
