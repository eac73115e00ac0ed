"""The demo set of repository tasks: bugs injected into inflection 0.5.1, the SWE-smith way.

``curation/demo_data/inflection-0.5.1.tar.gz`` is the library's source distribution as PyPI
serves it (MIT licence, in the archive), tests included. ``repo_tasks.json`` beside it is built
by ``scripts/build_repo_demo.py``: each task is one small edit inside one function (a flipped
comparison, a changed constant, a swapped case...) that the library's own tests catch, the tests
it breaks (FAIL_TO_PASS), and an issue written from the failing behaviour. Every other test that
passes on the pristine library is PASS_TO_PASS. Nothing is downloaded: the snapshot of each task
is the pristine files with the bug in, built here and stored by content hash.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.repo_tasks import snapshots
from engine.repo_tasks.patches import diff_files
from engine.repo_tasks.world import TOOL_SCHEMAS

DATA = Path(__file__).with_name("demo_data")
SDIST = DATA / "inflection-0.5.1.tar.gz"
TASKS_FILE = DATA / "repo_tasks.json"
TEST_FILE = "test_inflection.py"
SOURCE_FILE = "inflection/__init__.py"
PROMPT = """You are working in the repository of the Python library `inflection` (version 0.5.1).
A user reported this issue:

{issue}

Here is `{source_file}`:

```python
{source}```

Fix the bug in the library (not in the tests). Answer with a unified diff against the repository
in one ```diff block, with paths like a/{source_file} and b/{source_file}."""
EPISODE_PROMPT = """You are working in the repository of the Python library `inflection` (version 0.5.1).
A user reported this issue:

{issue}

Use the tools to read the code, fix the bug in the library (not in the tests) and run the tests.
Reply without a tool call when you are done: your edits to the repository are graded."""


def pristine_files() -> dict[str, str]:
    """The source distribution's text files, paths relative to the project root (metadata left out)."""
    files: dict[str, str] = {}
    with tarfile.open(SDIST, mode="r:gz") as archive:
        for member in archive.getmembers():
            name = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not member.isfile() or not name or ".egg-info" in name or "__pycache__" in name:
                continue
            extracted = archive.extractfile(member)
            assert extracted is not None
            files[name] = extracted.read().decode("utf-8")
    return files


def with_bug(files: dict[str, str], bug: dict[str, Any]) -> dict[str, str]:
    """``files`` with one bug injected: the ``occurrence``-th ``find`` inside function ``function``
    of the source file replaced by ``replace``."""
    source = files[SOURCE_FILE]
    start = source.index(f"\ndef {bug['function']}(")
    end = source.find("\ndef ", start + 1)
    end = len(source) if end < 0 else end
    body = source[start:end]
    position = -1
    for _ in range(bug["occurrence"] + 1):
        position = body.index(bug["find"], position + 1)
    mutated = body[:position] + bug["replace"] + body[position + len(bug["find"]) :]
    return {**files, SOURCE_FILE: source[:start] + mutated + source[end:]}


def snapshot_bytes(files: dict[str, str]) -> bytes:
    return snapshots.build_from_files({path: text.encode("utf-8") for path, text in files.items()})


def load_definitions() -> dict[str, Any]:
    return json.loads(TASKS_FILE.read_text(encoding="utf-8"))


def task_rows(*, store: Any, episodes: bool = False) -> Iterator[dict[str, Any]]:
    """Import rows (the README's task format) for every demo task; ``store(data=bytes)`` stores
    each snapshot and returns its SnapshotInfo (``curation.repo_snapshots.snapshot_store``).
    With ``episodes`` the tasks are multi-turn: the repository world's tools, no code in the prompt."""
    definitions = load_definitions()
    pristine = pristine_files()
    passing = definitions["passing_tests"]
    for bug in definitions["tasks"]:
        buggy = with_bug(pristine, bug)
        info = store(data=snapshot_bytes(buggy))
        fail_to_pass = bug["fail_to_pass"]
        reference = diff_files(buggy, pristine)
        prompt = PROMPT.format(issue=bug["issue"], source_file=SOURCE_FILE, source=buggy[SOURCE_FILE])
        yield {
            "key": bug["key"] + ("-tools" if episodes else ""),
            "prompt": EPISODE_PROMPT.format(issue=bug["issue"]) if episodes else prompt,
            **({"tools": TOOL_SCHEMAS} if episodes else {}),
            "answer": f"```diff\n{reference}```",
            "verifier": {
                "kind": "repo_tests",
                "snapshot": info.digest,
                "fail_to_pass": fail_to_pass,
                "pass_to_pass": [test for test in passing if test not in set(fail_to_pass)],
                "hidden_tests": {TEST_FILE: pristine[TEST_FILE]},
                "timeout_seconds": 60,
            },
            "domain": "code",
            "metadata": {
                "source": "inflection 0.5.1 (PyPI sdist), bug injected SWE-smith style",
                "function": bug["function"],
                "mutation": bug["operator"],
                "issue": bug["issue"],
            },
            "authoring_cost_usd": 20,
        }
