"""Grading a patch against a repository task, in a fresh copy of the snapshot, in the sandbox.

    >>> result = grade(task=spec, snapshot=data, patch=diff_text)
    >>> result.outcome, result.detail     # "pass" | "fail" | "error" | "timeout"

Steps: the patch loses every section that touches a test file, the pytest configuration or an
interpreter start-up file (``patches.filter_patch``); the sandbox unpacks the snapshot, applies
what is left with ``git apply``, removes planted files, writes the hidden tests and runs pytest
(``runner_program.py``, ``pytest_child.py``); then this module reads the evidence. Reward 1 only
when every FAIL_TO_PASS and PASS_TO_PASS test passed with its completion mark, the session
ended, pytest's internals were left alone and no guarded file changed during the run.

A patch that does not apply is a wrong answer (``fail``); a test run past its time limit is a
``timeout``; the sandbox failing to start is an ``error`` (no reward). Whatever the code under
test does to the test process (exits, kills it, patches pytest) ends as a ``fail``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.repo_tasks.patches import filter_patch, is_test_path
from engine.sandbox import Sandbox, SandboxLimits, SandboxRun
from engine.sandbox.view import MissingDistribution, repository_view, sandbox_for

RUNNER_SOURCE = Path(__file__).with_name("runner_program.py").read_text(encoding="utf-8")
CHILD_SOURCE = Path(__file__).with_name("pytest_child.py").read_text(encoding="utf-8")
PYTEST_ARGS = ("-p", "no:cacheprovider", "-o", "addopts=", "-q", "--tb=short", "-W", "ignore::DeprecationWarning")
SETUP_SECONDS = 30.0  # unpacking, applying and cleaning, on top of the tests' own time
RESULT_PREFIX = "PASSBAND-RESULT "


@dataclass(frozen=True)
class RepoTaskSpec:
    """What grading needs of a repository task (the ``repo_tests`` verifier config, parsed)."""

    snapshot: str  # "sha256:<hex>"
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    hidden_tests: dict[str, str] = field(default_factory=dict)
    timeout_seconds: float = 60.0
    memory_mb: int = 2048
    max_processes: int = 16
    extra_test_files: tuple[str, ...] = ()  # run these whole too (building a task: every test)
    dependencies: tuple[str, ...] = ()  # distributions the tests may import besides pytest (the sandbox's view)

    @property
    def test_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.fail_to_pass + self.pass_to_pass))

    @property
    def test_files(self) -> tuple[str, ...]:
        return tuple(sorted({test_id.split("::", 1)[0] for test_id in self.test_ids} | set(self.extra_test_files)))


@dataclass(frozen=True)
class CaseResult:
    test_id: str
    outcome: str  # "passed", "failed", "error", "not run", "skipped", "forged"
    text: str = ""


@dataclass(frozen=True)
class GradeResult:
    outcome: str  # "pass" | "fail" | "error" | "timeout"
    detail: str
    tests: dict[str, CaseResult] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    output: str = ""
    seconds: float | None = None
    collect_errors: tuple[str, ...] = ()  # "path: error" for test files pytest could not import

    def failing(self, test_ids: Iterable[str]) -> list[CaseResult]:
        return [
            self.tests.get(test_id, CaseResult(test_id, "not run")) for test_id in test_ids if not self.passed(test_id)
        ]

    def passed(self, test_id: str) -> bool:
        result = self.tests.get(test_id)
        return result is not None and result.outcome == "passed"


def grade(*, task: RepoTaskSpec, snapshot: bytes, patch: str, sandbox: Sandbox | None = None) -> GradeResult:
    """Grade ``patch`` (a unified diff, possibly empty) on a fresh copy of ``snapshot``."""
    filtered = filter_patch(patch, hidden_tests=frozenset(task.hidden_tests))
    run, result = run_in_sandbox(task=task, snapshot=snapshot, patch=filtered.text, sandbox=sandbox)
    if run.status == "error":
        return GradeResult("error", f"the sandbox failed: {run.error}", dropped=filtered.dropped)
    if run.status == "timeout":
        return GradeResult(
            "timeout", f"the grading run hit its {run.timeout_reason} time limit", dropped=filtered.dropped
        )
    if result is None:
        tail = (run.stderr or run.stdout)[-300:]
        return GradeResult(
            "fail", f"the grading run ended without a result ({run.status}): {tail}", dropped=filtered.dropped
        )
    return judge(task=task, result=result, dropped=filtered.dropped, patch_kept=bool(filtered.text.strip()))


def run_in_sandbox(
    *, task: RepoTaskSpec, snapshot: bytes, patch: str, sandbox: Sandbox | None = None
) -> tuple[SandboxRun, dict[str, Any] | None]:
    """One run of runner_program.py; the result it printed with this run's nonce, if any. Without a given
    sandbox, the tests run in the view of pytest and the task's declared dependencies only."""
    if sandbox is None:
        try:
            sandbox = sandbox_for(repository_view(task.dependencies))
        except MissingDistribution as error:
            return SandboxRun(status="error", error=f"a declared dependency: {error}"), None
    nonce = secrets.token_hex(16)
    child_nonce = secrets.token_hex(16)
    guarded = sorted(set(task.hidden_tests) | {path for path in task.test_files if is_test_path(path)})
    request = {
        "nonce": nonce,
        "child_nonce": child_nonce,
        "snapshot": base64.b64encode(snapshot).decode(),
        "patch": patch,
        "hidden_tests": task.hidden_tests,
        "guarded_files": guarded,
        "test_files": list(task.test_files),
        "pytest_args": list(PYTEST_ARGS),
        "test_timeout_seconds": task.timeout_seconds,
        "child_source": CHILD_SOURCE,
        # The real interpreter: a virtualenv's bin/ is not visible inside the sandbox.
        "python": os.path.realpath(sandbox_python(sandbox)),
    }
    limits = SandboxLimits(
        wall_seconds=task.timeout_seconds + SETUP_SECONDS,
        cpu_seconds=task.timeout_seconds + SETUP_SECONDS,
        memory_bytes=task.memory_mb << 20,
        max_processes=task.max_processes,
        max_open_files=256,
        max_file_bytes=64 << 20,
        tmp_bytes=256 << 20,
        max_output_bytes=16 << 20,
    )
    run = sandbox.run_script(program=RUNNER_SOURCE, stdin=json.dumps(request), limits=limits)
    result = None
    for line in run.stdout.splitlines():
        if line.startswith(RESULT_PREFIX + nonce + " "):
            try:
                result = json.loads(line[len(RESULT_PREFIX) + len(nonce) + 1 :])
            except ValueError:
                result = None
    if isinstance(result, dict):
        result["child_nonce"] = child_nonce
        return run, result
    return run, None


def sandbox_python(sandbox: Sandbox | None) -> str:
    return (sandbox or sandbox_for(repository_view())).python


def judge(*, task: RepoTaskSpec, result: dict[str, Any], dropped: tuple[str, ...], patch_kept: bool) -> GradeResult:
    """The verdict from the runner's result (see the module docstring for the rule)."""
    removed = result.get("removed") or []
    if result.get("infra_error"):
        return GradeResult("error", f"the grader could not run: {result['infra_error']}", dropped=dropped)
    if not result.get("applied", False):
        return GradeResult(
            "fail", "the patch does not apply: " + _last_lines(result.get("apply_output", "")), dropped=dropped
        )
    if not result.get("started", False):
        return GradeResult(
            "error", f"the test process could not start: {result.get('start_error', '')}", dropped=dropped
        )
    output = str(result.get("output_tail", ""))
    seconds = result.get("seconds")
    if result.get("timed_out"):
        return GradeResult("timeout", f"the tests ran past {task.timeout_seconds:g} s", dropped=dropped, output=output)
    tests, session = read_records(str(result.get("records", "")), nonce=str(result["child_nonce"]))
    common: dict[str, Any] = {
        "tests": tests,
        "dropped": dropped,
        "output": output,
        "seconds": seconds,
        "collect_errors": tuple(session["collect_errors"]),
    }
    problems = []
    if result.get("changed_during_run"):
        problems.append("test files changed during the run: " + ", ".join(result["changed_during_run"]))
    if session.get("changed"):
        problems.append("pytest's own functions were replaced: " + ", ".join(session["changed"]))
    if not session.get("finished"):
        problems.append(f"the test session did not finish (the test process exited with {result.get('exit_code')})")
    failing_f2p = [test for test in task.fail_to_pass if not _passed(tests, test)]
    failing_p2p = [test for test in task.pass_to_pass if not _passed(tests, test)]
    if failing_f2p:
        problems.append(_describe_failing("FAIL_TO_PASS", task.fail_to_pass, failing_f2p, tests))
    if failing_p2p:
        problems.append(_describe_failing("PASS_TO_PASS", task.pass_to_pass, failing_p2p, tests))
    notes = []
    if dropped:
        notes.append("ignored changes to " + ", ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else ""))
    if removed:
        notes.append("removed planted " + ", ".join(removed[:5]) + (" ..." if len(removed) > 5 else ""))
    suffix = ("; " + "; ".join(notes)) if notes else ""
    if problems:
        return GradeResult("fail", "; ".join(problems) + suffix, **common)
    if not patch_kept and not task.fail_to_pass:
        return GradeResult("fail", "the patch changes nothing that is graded" + suffix, **common)
    total = len(task.test_ids)
    return GradeResult("pass", f"all {total} tests pass ({len(task.fail_to_pass)} FAIL_TO_PASS){suffix}", **common)


def read_records(text: str, *, nonce: str) -> tuple[dict[str, CaseResult], dict[str, Any]]:
    """Per test id, the outcome the records prove; and the session's ``finished``/``changed``."""
    phases: dict[str, dict[str, dict[str, Any]]] = {}
    unwrapped: set[str] = set()
    session: dict[str, Any] = {"finished": False, "changed": [], "collect_errors": []}
    changed: set[str] = set()
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("nonce") != nonce:
            continue
        event = record.get("event")
        if event == "report":
            phases.setdefault(str(record.get("id")), {})[str(record.get("when"))] = record
            changed.update(record.get("changed") or [])
        elif event == "collect_error":
            session["collect_errors"].append(f"{record.get('id')}: {str(record.get('text', ''))[-1500:]}")
        elif event == "unwrapped":
            unwrapped.add(str(record.get("id")))
        elif event == "finish":
            session["finished"] = True
            changed.update(record.get("changed") or [])
    session["changed"] = sorted(changed)
    tests: dict[str, CaseResult] = {}
    for test_id, by_phase in phases.items():
        tests[test_id] = _test_outcome(test_id, by_phase, wrapped=test_id not in unwrapped)
    return tests, session


def _test_outcome(test_id: str, by_phase: dict[str, dict[str, Any]], *, wrapped: bool) -> CaseResult:
    for when in ("setup", "call", "teardown"):
        phase = by_phase.get(when)
        if phase is not None and phase.get("outcome") == "failed":
            return CaseResult(test_id, "failed" if when == "call" else "error", str(phase.get("text", "")))
    call = by_phase.get("call")
    if call is None:
        skipped = any(phase.get("outcome") == "skipped" for phase in by_phase.values())
        return CaseResult(test_id, "skipped" if skipped else "not run")
    if call.get("outcome") != "passed":
        return CaseResult(test_id, str(call.get("outcome")))
    if wrapped and not call.get("completed"):
        return CaseResult(test_id, "forged", "reported as passed, but the test function never returned")
    if "teardown" not in by_phase:
        return CaseResult(test_id, "not run", "no teardown report")
    return CaseResult(test_id, "passed")


def _passed(tests: dict[str, CaseResult], test_id: str) -> bool:
    result = tests.get(test_id)
    return result is not None and result.outcome == "passed"


def _describe_failing(label: str, all_ids: tuple[str, ...], failing: list[str], tests: dict[str, CaseResult]) -> str:
    shown = ", ".join(
        f"{test_id} ({tests[test_id].outcome if test_id in tests else 'not run'})" for test_id in failing[:3]
    )
    more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
    return f"{len(failing)} of {len(all_ids)} {label} tests do not pass: {shown}{more}"


def _last_lines(text: str, count: int = 4) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:])[-600:]
