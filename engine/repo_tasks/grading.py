"""Grading a patch against a repository task, in a fresh copy of the snapshot, in the sandbox.

    >>> result = grade(task=spec, snapshot=data, patch=diff_text)
    >>> result.outcome, result.detail     # "pass" | "fail" | "tampered" | "error" | "timeout"
    >>> grade_many(task=spec, snapshot=data, patches=[a, b, c])   # one sandbox run, a fresh copy each

Steps: the patch loses every section that touches a test file, the pytest configuration or an
interpreter start-up file (``patches.filter_patch``); the sandbox unpacks the snapshot, applies
what is left with ``git apply``, removes planted files, and runs pytest on the hidden tests as the
grader compiled them (``runner_program.py``, ``pytest_child.py``, ``hidden_tests.py``,
``test_guard.py``); then this module reads the evidence (``evidence.py``). Reward 1 only when every
FAIL_TO_PASS and PASS_TO_PASS test passed with its completion mark, the session ended, pytest's
internals were left alone and no guarded file changed during the run.

``tampered`` (reward 0, never a pass) when the run shows the tests or the grading were subverted: a
check in the test process failed (a test's code or globals not the grader's, the module's names or
builtins changed, a test's arguments rewritten, a tracer installed), a canary passed or was not run,
pytest collected or ran other tests than the hidden files define, or the applied patch changed a
protected path the filter did not see. A patch that does not apply is a wrong answer (``fail``); a
test run past its time limit is a ``timeout``; the sandbox failing to start is an ``error``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.repo_tasks.evidence import CaseResult, path_evidence, read_records
from engine.repo_tasks.patches import PYTEST_CONFIG_FILES, filter_patch, forbidden_reason, is_test_path

if TYPE_CHECKING:  # the sandbox is imported where a run starts: a Harbor folder grades with this module alone
    from engine.sandbox import Sandbox, SandboxRun

HERE = Path(__file__).parent
RUNNER_SOURCE = (HERE / "runner_program.py").read_text(encoding="utf-8")
CHILD_SOURCE = (HERE / "pytest_child.py").read_text(encoding="utf-8")
PREPARE_SOURCE = (HERE / "hidden_tests.py").read_text(encoding="utf-8")
GUARD_SOURCE = (HERE / "test_guard.py").read_text(encoding="utf-8")
TREE_SOURCE = (HERE / "runner_tree.py").read_text(encoding="utf-8")
PYTEST_ARGS = ("-p", "no:cacheprovider", "-o", "addopts=", "-q", "--tb=short", "-W", "ignore::DeprecationWarning")
SETUP_SECONDS = 30.0  # unpacking, applying and cleaning, on top of the tests' own time
DEADLINE_MARGIN_SECONDS = 3.0
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
class GradeResult:
    outcome: str  # "pass" | "fail" | "tampered" | "error" | "timeout"
    detail: str
    tests: dict[str, CaseResult] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    output: str = ""
    seconds: float | None = None
    collect_errors: tuple[str, ...] = ()  # "path: error" for test files pytest could not import
    evidence: tuple[str, ...] = ()  # why the verdict is "tampered"

    def failing(self, test_ids: Iterable[str]) -> list[CaseResult]:
        return [
            self.tests.get(test_id, CaseResult(test_id, "not run")) for test_id in test_ids if not self.passed(test_id)
        ]

    def passed(self, test_id: str) -> bool:
        result = self.tests.get(test_id)
        return result is not None and result.outcome == "passed"


def grade(*, task: RepoTaskSpec, snapshot: bytes, patch: str, sandbox: Sandbox | None = None) -> GradeResult:
    """Grade ``patch`` (a unified diff, possibly empty) on a fresh copy of ``snapshot``."""
    return grade_many(task=task, snapshot=snapshot, patches=[patch], sandbox=sandbox)[0]


def grade_many(
    *, task: RepoTaskSpec, snapshot: bytes, patches: list[str], sandbox: Sandbox | None = None
) -> list[GradeResult]:
    """Each patch graded on its own fresh copy of ``snapshot``, as many per sandbox run as its time
    limit allows (the runner kills every process a test run left before the next patch; patches it
    had no time for go to the next run). Out: one GradeResult per patch, in order."""
    filtered = [filter_patch(patch, hidden_tests=frozenset(task.hidden_tests)) for patch in patches]
    graded: dict[int, GradeResult] = {}
    waiting = list(range(len(filtered)))
    while waiting:
        texts = [filtered[index].text for index in waiting]
        run, results = run_in_sandbox(task=task, snapshot=snapshot, patches=texts, sandbox=sandbox)
        for position, result in results.items():
            item = filtered[waiting[position]]
            kept = bool(item.text.strip())
            graded[waiting[position]] = judge(task=task, result=result, dropped=item.dropped, patch_kept=kept)
        if 0 not in results:  # the run ended on the first patch: that patch's verdict is the run's
            graded[waiting[0]] = _run_failure(run, filtered[waiting[0]].dropped)
        waiting = [index for index in waiting if index not in graded]
    return [graded[index] for index in range(len(filtered))]


def _run_failure(run: SandboxRun, dropped: tuple[str, ...]) -> GradeResult:
    if run.status == "error":
        return GradeResult("error", f"the sandbox failed: {run.error}", dropped=dropped)
    if run.status == "timeout":
        return GradeResult("timeout", f"the grading run hit its {run.timeout_reason} time limit", dropped=dropped)
    tail = (run.stderr or run.stdout)[-300:]
    return GradeResult("fail", f"the grading run ended without a result ({run.status}): {tail}", dropped=dropped)


def run_in_sandbox(
    *, task: RepoTaskSpec, snapshot: bytes, patches: list[str], sandbox: Sandbox | None = None
) -> tuple[SandboxRun, dict[int, dict[str, Any]]]:
    """One run of runner_program.py; {patch index: the result it printed with this run's nonce}. Without a
    given sandbox, the tests run in the view of pytest and the task's declared dependencies only."""
    if sandbox is None:
        from engine.sandbox import SandboxRun

        try:
            sandbox = _task_sandbox(task.dependencies)
        except LookupError as error:  # the view's MissingDistribution
            return SandboxRun(status="error", error=f"a declared dependency: {error}"), {}
    nonce = secrets.token_hex(16)
    child_nonce = secrets.token_hex(16)
    guarded = sorted(set(task.hidden_tests) | {path for path in task.test_files if is_test_path(path)})
    request = {
        "nonce": nonce,
        "child_nonce": child_nonce,
        "snapshot": base64.b64encode(snapshot).decode(),
        "patches": patches,
        "hidden_tests": task.hidden_tests,
        "guarded_files": guarded,
        "test_files": list(task.test_files),
        "config_files": list(PYTEST_CONFIG_FILES),
        "pytest_args": list(PYTEST_ARGS),
        "test_timeout_seconds": task.timeout_seconds,
        "child_source": CHILD_SOURCE,
        "prepare_source": PREPARE_SOURCE,
        "guard_source": GUARD_SOURCE,
        "tree_source": TREE_SOURCE,
        # The real interpreter: a virtualenv's bin/ is not visible inside the sandbox.
        "python": os.path.realpath(sandbox_python(sandbox)),
    }
    count = max(1, len(patches))
    from engine.sandbox import SandboxLimits

    limits = SandboxLimits(
        wall_seconds=(task.timeout_seconds + SETUP_SECONDS) * count,
        cpu_seconds=(task.timeout_seconds + SETUP_SECONDS) * count,
        memory_bytes=task.memory_mb << 20,
        max_processes=task.max_processes,
        max_open_files=256,
        max_file_bytes=64 << 20,
        tmp_bytes=256 << 20,
        max_output_bytes=16 << 20,
    )
    box = sandbox
    # The runner starts no patch it could not finish within what the sandbox grants.
    request["deadline_seconds"] = box.maxima.clamp(limits).wall_seconds - DEADLINE_MARGIN_SECONDS
    run = box.run_script(program=RUNNER_SOURCE, stdin=json.dumps(request), limits=limits)
    return run, parse_results(run.stdout, nonce=nonce, child_nonce=child_nonce)


def parse_results(stdout: str, *, nonce: str, child_nonce: str) -> dict[int, dict[str, Any]]:
    """The runner's result lines carrying ``nonce``: {patch index: result}."""
    results: dict[int, dict[str, Any]] = {}
    prefix = RESULT_PREFIX + nonce + " "
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        index, _, payload = line[len(prefix) :].partition(" ")
        try:
            result = json.loads(payload)
            number = int(index)
        except ValueError:
            continue
        if isinstance(result, dict):
            result["child_nonce"] = child_nonce
            results[number] = result
    return results


def sandbox_python(sandbox: Sandbox | None) -> str:
    """The Python that runs the tests: the given sandbox's, or that of pytest's view."""
    return (sandbox or _task_sandbox(())).python


def _task_sandbox(dependencies: tuple[str, ...]) -> Sandbox:
    """The sandbox a task's tests run in: the view of pytest and `dependencies` only; in an exported Harbor
    folder (whose stand-in engine.sandbox has no views) its plain child process. Raises LookupError
    (MissingDistribution) for a declared distribution that is not installed."""
    try:
        from engine.sandbox.view import repository_view, sandbox_for
    except ImportError:
        from engine.sandbox import default_sandbox

        return default_sandbox()
    return sandbox_for(repository_view(dependencies))


def judge(*, task: RepoTaskSpec, result: dict[str, Any], dropped: tuple[str, ...], patch_kept: bool) -> GradeResult:
    """The verdict from the runner's result (see the module docstring for the rule)."""
    removed = result.get("removed") or []
    if result.get("infra_error"):
        return GradeResult("error", f"the grader could not run: {result['infra_error']}", dropped=dropped)
    if not result.get("applied", False):
        return GradeResult(
            "fail", "the patch does not apply: " + _last_lines(result.get("apply_output", "")), dropped=dropped
        )
    hidden = frozenset(task.hidden_tests)
    disguised = path_evidence(result, lambda path: forbidden_reason(path, hidden_tests=hidden))
    if disguised:
        detail = "tampered: " + "; ".join(disguised[:3])
        return GradeResult("tampered", detail, dropped=dropped, evidence=tuple(disguised))
    if not result.get("started", False):
        return GradeResult(
            "error", f"the test process could not start: {result.get('start_error', '')}", dropped=dropped
        )
    output = str(result.get("output_tail", ""))
    if result.get("timed_out"):
        return GradeResult("timeout", f"the tests ran past {task.timeout_seconds:g} s", dropped=dropped, output=output)
    records = read_records(str(result.get("records", "")), nonce=str(result["child_nonce"]))
    tests = records.tests
    common: dict[str, Any] = {
        "tests": tests,
        "dropped": dropped,
        "output": output,
        "seconds": result.get("seconds"),
        "collect_errors": tuple(records.collect_errors),
    }
    if records.evidence:
        evidence = tuple(dict.fromkeys(records.evidence))
        shown = "; ".join(evidence[:3]) + (f" and {len(evidence) - 3} more" if len(evidence) > 3 else "")
        return GradeResult("tampered", "tampered: " + shown, evidence=evidence, **common)
    problems = []
    if result.get("changed_during_run"):
        problems.append("test files changed during the run: " + ", ".join(result["changed_during_run"]))
    if records.changed:
        problems.append("pytest's own functions were replaced: " + ", ".join(records.changed))
    if not records.finished:
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
