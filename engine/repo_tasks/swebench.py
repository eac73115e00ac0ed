"""SWE-bench-style rows as repository tasks (no Django; the command is ``manage.py import_swebench``).

A row has ``instance_id``, ``repo``, ``base_commit``, ``problem_statement``, ``patch`` (the reference
fix), ``test_patch`` (the tests that check it), ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (JSON-encoded
lists of test ids in the published data; lists are accepted too), ``version`` and
``environment_setup_commit``. The repository comes as a local snapshot of ``base_commit``; the hidden
tests are the files the ``test_patch`` changes, as they are after it (applied here with
``git apply`` in a scratch folder: data only, nothing of the repository runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.repo_tasks.grading import GradeResult
from engine.repo_tasks.patches import split_patch

REQUIRED = ("instance_id", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
METADATA = ("repo", "base_commit", "version", "environment_setup_commit", "created_at")
PROMPT = """{problem_statement}

Fix this issue in the repository. Answer with a unified diff against the repository root in one
```diff block (paths like a/path/to/file.py and b/path/to/file.py)."""


class RowError(ValueError):
    """A row that cannot become a task; ``field`` names what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def test_ids(row: Mapping[str, Any], field: str) -> list[str]:
    """A FAIL_TO_PASS / PASS_TO_PASS value: a JSON-encoded list of strings (as published) or a list."""
    value = row.get(field)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise RowError(field, f"is not a JSON list of test ids ({error})") from error
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RowError(field, "must be a list of test ids (or its JSON text)")
    return value


def hidden_tests(files: Mapping[str, bytes], test_patch: str) -> dict[str, str]:
    """The text of every file ``test_patch`` creates or changes, after applying it to ``files``."""
    touched = sorted({path for section in split_patch(test_patch) for path in section.paths})
    if not touched:
        raise RowError("test_patch", "holds no file section")
    with tempfile.TemporaryDirectory(prefix="passband-test-patch-") as folder:
        root = Path(folder)
        for path in touched:
            if path in files:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_bytes(files[path])
        (root / ".test.patch").write_text(test_patch if test_patch.endswith("\n") else test_patch + "\n")
        completed = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", ".test.patch"],
            cwd=root,
            capture_output=True,
            text=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": folder, "GIT_CONFIG_NOSYSTEM": "1"},
            timeout=60,
        )
        if completed.returncode != 0:
            raise RowError("test_patch", f"does not apply to the snapshot: {completed.stderr.strip()[-300:]}")
        return {path: (root / path).read_text(encoding="utf-8") for path in touched if (root / path).is_file()}


def task_row(row: Mapping[str, Any], *, files: Mapping[str, bytes], snapshot_digest: str) -> dict[str, Any]:
    """The Passband task row for one SWE-bench row. Raises RowError naming the field at fault."""
    for field in REQUIRED:
        if row.get(field) in (None, ""):
            raise RowError(field, "is required")
    fail_to_pass = test_ids(row, "FAIL_TO_PASS")
    if not fail_to_pass:
        raise RowError("FAIL_TO_PASS", "is empty: nothing shows the fix")
    return {
        "key": str(row["instance_id"]),
        "prompt": PROMPT.format(problem_statement=str(row["problem_statement"]).strip()),
        "answer": f"```diff\n{row['patch']}```",
        "verifier": {
            "kind": "repo_tests",
            "snapshot": snapshot_digest,
            "fail_to_pass": fail_to_pass,
            "pass_to_pass": test_ids(row, "PASS_TO_PASS"),
            "hidden_tests": hidden_tests(files, str(row["test_patch"])),
        },
        "domain": "code",
        "metadata": {"source": "swe-bench row", "instance_id": row["instance_id"]}
        | {field: row[field] for field in METADATA if row.get(field) not in (None, "")},
    }


def flaky(first: GradeResult, second: GradeResult, test_ids: list[str]) -> list[str]:
    """The ids whose result differs between two runs of the same patch."""
    return [test_id for test_id in test_ids if first.passed(test_id) != second.passed(test_id)]
