"""SWE-bench-style rows into an environment: each row's local snapshot stored by hash, its test
patch turned into hidden tests, PASS_TO_PASS tests that are flaky here dropped, then the ordinary
import (all or nothing, with the audits). The row format: ``engine/repo_tasks/swebench.py``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from curation.imports import ImportReport, tasks_import
from curation.models import Environment
from curation.repo_snapshots import snapshot_store
from engine.repo_tasks import snapshots, swebench
from engine.repo_tasks.grading import grade
from engine.repo_tasks.patches import extract_patch
from engine.verifiers.kinds import repo_tests


class RowsRejected(ValueError):
    """Rows that cannot become tasks; ``problems`` are ``line N, field F: what`` lines. Nothing was imported."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class SwebenchImport:
    report: ImportReport
    dropped_flaky: dict[str, list[str]] = field(default_factory=dict)  # instance_id -> PASS_TO_PASS ids dropped


def _snapshot_bytes(snapshots_dir: Path, instance_id: str) -> bytes | None:
    archive = snapshots_dir / f"{instance_id}.tar.gz"
    if archive.is_file():
        return archive.read_bytes()
    folder = snapshots_dir / instance_id
    return snapshots.build_from_directory(folder) if folder.is_dir() else None


def swebench_rows_import(
    *,
    environment: Environment,
    owner: AbstractBaseUser,
    rows_path: Path,
    snapshots_dir: Path,
    run_audits: bool = True,
    drop_flaky: bool = True,
) -> SwebenchImport:
    """Import a JSONL file of SWE-bench rows whose repositories are ``<snapshots_dir>/<instance_id>``
    (a folder: the work tree at ``base_commit``) or ``<instance_id>.tar.gz``. Raises RowsRejected
    naming line and field for every bad row (nothing imported), ImportRejected as a task file does."""
    problems: list[str] = []
    tasks: list[dict[str, Any]] = []
    dropped: dict[str, list[str]] = {}
    for number, line in enumerate(rows_path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise swebench.RowError("row", "must be a JSON object")
            instance_id = str(row.get("instance_id") or "")
            data = _snapshot_bytes(snapshots_dir, instance_id) if instance_id else None
            if data is None:
                raise swebench.RowError(
                    "instance_id", f"no snapshot {instance_id!r} (folder or .tar.gz) in {snapshots_dir.name}"
                )
            info = snapshot_store(data=data)
            task = swebench.task_row(row, files=snapshots.read_files(data), snapshot_digest=info.digest)
            repo_tests.parse_config(task["verifier"])
        except ValueError as error:  # JSON, RowError, SnapshotError, VerifierConfigError
            # RowError and VerifierConfigError messages start with their field.
            problems.append(
                f"line {number}, field {error}" if getattr(error, "field", None) else f"line {number}: {error}"
            )
            continue
        if drop_flaky:
            dropped_here = _flaky_pass_to_pass(task, data)
            if dropped_here:
                task["verifier"]["pass_to_pass"] = [
                    t for t in task["verifier"]["pass_to_pass"] if t not in dropped_here
                ]
                task["metadata"]["dropped_flaky"] = dropped_here
                dropped[task["key"]] = dropped_here
        tasks.append(task)
    if problems:
        raise RowsRejected(problems)
    data_lines = "".join(json.dumps(task) + "\n" for task in tasks).encode("utf-8")
    report = tasks_import(
        environment=environment, owner=owner, data=data_lines, filename=rows_path.name, run_audits=run_audits
    )
    return SwebenchImport(report=report, dropped_flaky=dropped)


def _flaky_pass_to_pass(task: dict[str, Any], data: bytes) -> list[str]:
    """PASS_TO_PASS ids whose result differs between two runs, with the reference patch or without one."""
    spec = repo_tests.parse_config(task["verifier"])
    found: list[str] = []
    for patch in (extract_patch(task["answer"]), ""):
        first, second = (grade(task=spec, snapshot=data, patch=patch) for _ in range(2))
        found += swebench.flaky(first, second, list(spec.pass_to_pass))
    return sorted(set(found))
