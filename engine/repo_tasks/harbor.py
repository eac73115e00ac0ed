"""Repository tasks as Harbor task folders (instruction.md, task.toml, environment/, tests/, solution/).

``harbor_folder`` turns one ``repo_tests`` task into the files of a Harbor task whose environment is a
plain Python image: the snapshot is copied into it at ``/testbed``; ``tests/test.sh`` runs
``tests/grade.py``, which turns the agent's edits (``/testbed`` against the pristine snapshot the tests
folder carries) into a patch and grades it with Passband's own grading modules, carried under
``tests/passband/`` (the same filter, runner, compiled hidden tests, guard, canaries and evidence: the
same verdict as the probe and the API); reward 1 in ``/logs/verifier/reward.txt`` only for ``pass``,
the verdict with its evidence in ``verdict.json``. ``solution/solve.sh`` applies the reference patch.
What Harbor's shared container cannot give (docs/repository-tasks.md): the sandbox around the run.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from engine.harbor_tasks import task_toml, test_sh_head
from engine.repo_tasks import snapshots
from engine.repo_tasks.grading import RepoTaskSpec
from engine.repo_tasks.patches import extract_patch

PYTEST_VERSION = "9.2.0"  # the version Passband's own sandbox runs the tests with
AGENT_SECONDS = 1800.0

TEST_SH = (
    test_sh_head(
        what="Passband repository task verifier (Harbor): the agent's edits graded as a patch, as Passband grades.",
        workdir='TESTBED="${TESTBED:-/testbed}"',
    )
    + r"""timeout {timeout} python3 "$HERE/grade.py" "$TESTBED" "$LOGS"
cat "$LOGS/reward.txt"
"""
)
HERE = Path(__file__).parent
# The grading modules the folder carries (tests/passband/engine/...), unchanged, and its stand-in sandbox.
CARRIED = {
    "engine/__init__.py": "",
    "engine/repo_tasks/__init__.py": "",
    **{
        f"engine/repo_tasks/{name}": (HERE / name).read_text(encoding="utf-8")
        for name in (
            "grading.py",
            "evidence.py",
            "hidden_tests.py",
            "patches.py",
            "snapshots.py",
            "runner_program.py",
            "runner_tree.py",
            "pytest_child.py",
            "test_guard.py",
        )
    },
    "engine/sandbox/__init__.py": (HERE / "harbor_files" / "sandbox_shim.py").read_text(encoding="utf-8"),
    "engine/sandbox/limits.py": (HERE.parent / "sandbox" / "limits.py").read_text(encoding="utf-8"),
}
GRADE_PY = (HERE / "harbor_files" / "grade.py").read_text(encoding="utf-8")

DOCKERFILE = """FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir pytest=={pytest}
COPY repo/ /testbed/
WORKDIR /testbed
"""


def harbor_folder(
    *, key: str, prompt: str, answer: str, spec: RepoTaskSpec, snapshot_files: Mapping[str, bytes]
) -> dict[str, bytes]:
    """The files of one Harbor task folder, ``{relative path: bytes}``."""
    files: dict[str, bytes] = {"instruction.md": (prompt.strip() + "\n").encode()}
    files["task.toml"] = task_toml(
        metadata={
            "passband_key": key,
            "passband_verifier": "repo_tests",
            "passband_snapshot": spec.snapshot,
            "category": "programming",
            "tags": ["repository", "bug-fix", "passband"],
            # What the shared container leaves outside the guarantee (docs/repository-tasks.md).
            "passband_grading": "Passband's grading of the agent's edits as a patch; the agent shares the "
            "verifier's container (its Python, pytest and processes), which Passband's sandbox would not allow",
        },
        verifier_seconds=spec.timeout_seconds + 120,
        agent_seconds=AGENT_SECONDS,
        memory_mb=spec.memory_mb,
        storage_mb=10240,
    )
    files["environment/Dockerfile"] = DOCKERFILE.format(pytest=PYTEST_VERSION).encode()
    for path, data in snapshot_files.items():
        files[f"environment/repo/{path}"] = data
    files["tests/test.sh"] = TEST_SH.replace("{timeout}", str(int(spec.timeout_seconds) + 60)).encode()
    files["tests/grade.py"] = GRADE_PY.encode()
    files["tests/pristine.tar.gz"] = snapshots.build_from_files(dict(snapshot_files))
    files["tests/spec.json"] = json.dumps(
        {
            "snapshot": spec.snapshot,
            "fail_to_pass": list(spec.fail_to_pass),
            "pass_to_pass": list(spec.pass_to_pass),
            "hidden_tests": spec.hidden_tests,
            "timeout_seconds": spec.timeout_seconds,
            "memory_mb": spec.memory_mb,
        },
        indent=1,
    ).encode()
    for path, text in CARRIED.items():
        files[f"tests/passband/{path}"] = text.encode()
    files["tests/tests.json"] = json.dumps(
        {
            "fail_to_pass": list(spec.fail_to_pass),
            "pass_to_pass": list(spec.pass_to_pass),
            "original_files": sorted(snapshot_files),
        },
        indent=1,
    ).encode()
    for path, text in spec.hidden_tests.items():
        files[f"tests/hidden/{path}"] = text.encode()
    patch = extract_patch(answer)
    files["solution/solve.sh"] = (
        '#!/bin/bash\nset -e\ncd "${TESTBED:-/testbed}"\n'
        "git apply --whitespace=nowarn - <<'PASSBAND_REFERENCE_PATCH'\n" + patch + "PASSBAND_REFERENCE_PATCH\n"
    ).encode()
    return files


# -- import: a Harbor task folder in this layout, back into a task row ---------------------------------


class HarborFolderError(ValueError):
    """A Harbor task folder that cannot be a repository task; the message names the file and field."""


_HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?[^\n]*\n(.*?)\n\1\n", re.DOTALL)


def _text(files: Mapping[str, bytes], path: str, folder: str) -> str:
    if path not in files:
        raise HarborFolderError(f"{folder}/{path}: missing")
    try:
        return files[path].decode("utf-8")
    except UnicodeDecodeError as error:
        raise HarborFolderError(f"{folder}/{path}: not UTF-8 text ({error})") from error


def _bounded(value: object, *, where: str, low: float, high: float, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HarborFolderError(f"{where}: must be a number, got {value!r}")
    return min(max(float(value), low), high)


def _task_toml(files: Mapping[str, bytes], folder: str) -> tuple[str, float, float]:
    """(key, verifier timeout in seconds, memory in MB) from the folder's ``task.toml``."""
    try:
        config = tomllib.loads(_text(files, "task.toml", folder))
    except tomllib.TOMLDecodeError as error:
        raise HarborFolderError(f"{folder}/task.toml: not TOML ({error})") from error
    metadata = config.get("metadata") or {}
    key = metadata.get("passband_key", folder)
    if not isinstance(key, str) or not key:
        raise HarborFolderError(f"{folder}/task.toml, field 'metadata.passband_key': must be a non-empty string")
    seconds = (config.get("verifier") or {}).get("timeout_sec")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        seconds -= 120  # the export's margin for building the image and unpacking
    timeout = _bounded(
        seconds,
        where=f"{folder}/task.toml, field 'verifier.timeout_sec'",
        low=1,
        high=300,
        default=60,
    )
    memory = _bounded(
        (config.get("environment") or {}).get("memory_mb"),
        where=f"{folder}/task.toml, field 'environment.memory_mb'",
        low=256,
        high=4096,
        default=2048,
    )
    return key, timeout, memory


def _test_lists(files: Mapping[str, bytes], folder: str) -> dict[str, list[str]]:
    """``fail_to_pass`` and ``pass_to_pass`` (pytest node ids) from the folder's ``tests/tests.json``."""
    try:
        tests = json.loads(_text(files, "tests/tests.json", folder))
    except json.JSONDecodeError as error:
        raise HarborFolderError(f"{folder}/tests/tests.json: not JSON ({error})") from error
    lists: dict[str, list[str]] = {}
    for field in ("fail_to_pass", "pass_to_pass"):
        value = tests.get(field, []) if isinstance(tests, dict) else None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise HarborFolderError(f"{folder}/tests/tests.json, field '{field}': must be a list of pytest node ids")
        lists[field] = value
    return lists


def _reference_patch(files: Mapping[str, bytes], folder: str) -> str:
    """The reference patch: the unified diff in the here-document of the folder's ``solution/solve.sh``."""
    solve = _text(files, "solution/solve.sh", folder)
    heredoc = _HEREDOC.search(solve)
    patch = extract_patch(heredoc.group(2) + "\n") if heredoc else ""
    if not patch.strip():
        raise HarborFolderError(
            f"{folder}/solution/solve.sh: holds no reference patch (a unified diff in a here-document)"
        )
    return patch


def task_from_harbor_folder(files: Mapping[str, bytes], *, folder: str) -> tuple[dict, dict[str, bytes]]:
    """A Harbor task folder (``{relative path: bytes}``) in the layout ``harbor_folder`` writes, as a task row
    whose ``verifier.snapshot`` is still to be filled, and the repository's files (``environment/repo/``).

    Read: ``instruction.md`` (the prompt), ``task.toml`` (``[metadata] passband_key`` or the folder's name
    as the key; the verifier's timeout less the two minutes the export added; the environment's memory),
    ``tests/tests.json`` (``fail_to_pass``, ``pass_to_pass``), ``tests/hidden/`` (the hidden tests),
    ``solution/solve.sh`` (the reference patch: the body of its here-document). Raises HarborFolderError
    naming the file and field."""
    prompt = _text(files, "instruction.md", folder).strip()
    if not prompt:
        raise HarborFolderError(f"{folder}/instruction.md: empty")
    key, timeout, memory = _task_toml(files, folder)
    lists = _test_lists(files, folder)
    hidden = {
        path.removeprefix("tests/hidden/"): _text(files, path, folder)
        for path in sorted(files)
        if path.startswith("tests/hidden/")
    }
    repository = {
        path.removeprefix("environment/repo/"): data
        for path, data in files.items()
        if path.startswith("environment/repo/")
    }
    if not repository:
        raise HarborFolderError(f"{folder}/environment/repo/: missing or empty (the repository the tests run on)")
    patch = _reference_patch(files, folder)
    row = {
        "key": key,
        "prompt": prompt,
        "answer": f"```diff\n{patch}```",
        "verifier": {
            "kind": "repo_tests",
            "snapshot": "",
            **lists,
            "hidden_tests": hidden,
            "timeout_seconds": timeout,
            "memory_mb": int(memory),
        },
        "domain": "code",
        "metadata": {"source": f"Harbor task folder {folder}"},
    }
    return row, repository
