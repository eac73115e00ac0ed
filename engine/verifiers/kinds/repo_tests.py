"""``repo_tests``: a patch to a repository, graded by the task's hidden tests (docs/repository-tasks.md).

Config::

    {"kind": "repo_tests",
     "snapshot": "sha256:<hex>",                       # the repository, stored once by this digest
     "fail_to_pass": ["tests/test_x.py::test_bug"],    # must fail before the fix and pass after
     "pass_to_pass": ["tests/test_x.py::test_ok"],     # must pass before and after
     "hidden_tests": {"tests/test_x.py": "..."},       # written over the repository at grading
     "test_command": "pytest",                         # the only runner for now
     "timeout_seconds": 60,                            # the test run's wall clock (max 300)
     "memory_mb": 2048}

The completion is the model's answer holding a unified diff (in ```diff fences or bare); the
reference answer is the reference patch. Grading: ``engine.repo_tasks.grading``. Snapshots come
from the store set with ``engine.repo_tasks.snapshots.configure_store``.
"""

from __future__ import annotations

import re
from typing import Any

from engine.repo_tasks import snapshots
from engine.repo_tasks.grading import GradeResult, RepoTaskSpec, grade, grade_many
from engine.repo_tasks.patches import extract_patch, forbidden_reason
from engine.verifiers.base import Check, ConfigReader, VerifierConfigError, errored, shorten
from engine.verifiers.kind import KindExports, VerifierKind
from engine.verifiers.text import completion_text

KIND = "repo_tests"
TEST_COMMANDS = ("pytest",)
AUDIT_OUTPUT_CHARS = 1500
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_DISTRIBUTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def parse_config(raw: dict[str, Any]) -> RepoTaskSpec:
    reader = ConfigReader(raw, kind=KIND)
    snapshot = reader.string("snapshot")
    if not _DIGEST.match(snapshot):
        raise VerifierConfigError("snapshot", f"must be 'sha256:' and 64 hex digits, got {shorten(snapshot, 40)!r}")
    fail_to_pass = reader.string_list("fail_to_pass", non_empty=True)
    pass_to_pass = reader.string_list("pass_to_pass", [])
    for field, ids in (("fail_to_pass", fail_to_pass), ("pass_to_pass", pass_to_pass)):
        for index, test_id in enumerate(ids):
            path = test_id.split("::", 1)[0]
            if "::" not in test_id or not path.endswith(".py") or forbidden_reason(path) == "outside the repository":
                raise VerifierConfigError(
                    f"{field}[{index}]", f"must be a pytest node id 'path.py::test', got {test_id!r}"
                )
    hidden_tests = reader.mapping("hidden_tests", {})
    for path, text in hidden_tests.items():
        if not isinstance(text, str) or forbidden_reason(path) == "outside the repository" or not path:
            raise VerifierConfigError(f"hidden_tests.{path}", "must map a relative path to the file's text")
    reader.string("test_command", "pytest", choices=TEST_COMMANDS)
    timeout = reader.number("timeout_seconds", 60, minimum=1, maximum=300)
    memory_mb = reader.integer("memory_mb", 2048, minimum=256, maximum=4096)
    dependencies = reader.string_list("dependencies", [])
    for index, name in enumerate(dependencies):
        if not _DISTRIBUTION.match(name):
            raise VerifierConfigError(f"dependencies[{index}]", f"must be a distribution name (as pip), got {name!r}")
    reader.finish()
    return RepoTaskSpec(
        snapshot=snapshot,
        fail_to_pass=tuple(fail_to_pass),
        pass_to_pass=tuple(pass_to_pass),
        hidden_tests=dict(hidden_tests),
        timeout_seconds=timeout,
        memory_mb=memory_mb,
        dependencies=tuple(dependencies),
    )


def check(config: RepoTaskSpec, *, completion: Any, answer: str | None = None, prompt: Any = None) -> Check:
    return check_many(config, completions=[completion])[0]


def check_many(config: RepoTaskSpec, *, completions: list[Any]) -> list[Check]:
    """``check`` for many completions of one task, their patches graded together (``grade_many``:
    as few sandbox runs as fit). Out: one Check per completion, in order."""
    checks: list[Check | None] = []
    patches: list[str] = []
    for completion in completions:
        if isinstance(completion, dict) and completion.get("stop_reason") == "tool_timeout":
            # As for every episode: a tool past its time limit (or the episode's tool budget) is no evidence.
            checks.append(Check("timeout", "a tool call of the episode ran past its time limit"))
            continue
        episode_patch = _episode_patch(completion)
        patch = episode_patch if episode_patch is not None else extract_patch(completion_text(completion))
        if not patch.strip():
            what = "the episode changed no file" if episode_patch is not None else "the answer holds no unified diff"
            checks.append(Check("fail", what))
            continue
        checks.append(None)
        patches.append(patch)
    if not patches:
        return [check for check in checks if check is not None]
    try:
        data = snapshots.load(config.snapshot)
    except snapshots.SnapshotError as error:
        return [check or errored(str(error)) for check in checks]
    graded = iter(grade_many(task=config, snapshot=data, patches=patches))
    return [check or _as_check(next(graded)) for check in checks]


def _as_check(result: GradeResult) -> Check:
    return Check(result.outcome, result.detail)


def _episode_patch(completion: Any) -> str | None:
    """A repository episode's edits (its final state's ``patch``); None when the completion is not one."""
    if isinstance(completion, dict) and isinstance(completion.get("final_state"), dict):
        patch = completion["final_state"].get("patch")
        return patch if isinstance(patch, str) else ""
    if isinstance(completion, dict) and "turns" in completion:
        return ""  # an episode that ended without a readable state (a tool timeout): nothing to grade
    return None


def audit_task(config: RepoTaskSpec, answer: str | None) -> list[str]:
    """The import audit of a repository task; ``[]`` when it holds. Each problem names the test
    and shows its output.

    The reference patch passes (every FAIL_TO_PASS and PASS_TO_PASS test); the unpatched
    repository fails every FAIL_TO_PASS test; PASS_TO_PASS passes before and after. Each side
    runs twice: a test whose result differs between the two runs is reported as flaky.
    """
    try:
        data = snapshots.load(config.snapshot)
    except snapshots.SnapshotError as error:
        return [str(error)]
    problems: list[str] = []
    patch = extract_patch(answer or "")
    if not patch.strip():
        problems.append("the reference answer holds no unified diff")
    runs = {
        "with the reference patch": [grade(task=config, snapshot=data, patch=patch) for _ in range(2)],
        "without a patch": [grade(task=config, snapshot=data, patch="") for _ in range(2)],
    }
    for side, results in runs.items():
        for result in results:
            if result.outcome in ("error", "timeout"):
                problems.append(f"{side}: the run gave {result.outcome}: {result.detail}")
        if any(result.outcome in ("error", "timeout") for result in results):
            continue
        first, second = results
        if first.collect_errors:
            problems.append(f"{side}: pytest could not import a test file: {_clip(first.collect_errors[0])}")
        for test_id in config.test_ids:
            if first.passed(test_id) != second.passed(test_id):
                problems.append(f"{side}: {test_id} is flaky (passed once, not the other time)")
        expected = {test_id: True for test_id in config.pass_to_pass}
        expected.update({test_id: side == "with the reference patch" for test_id in config.fail_to_pass})
        for test_id, should_pass in expected.items():
            if first.passed(test_id) == should_pass or first.passed(test_id) != second.passed(test_id):
                continue
            label = "FAIL_TO_PASS" if test_id in config.fail_to_pass else "PASS_TO_PASS"
            verb = "passes" if not should_pass else "does not pass"
            problems.append(f"{side}: {label} test {test_id} {verb}{_shown(first, test_id)}")
    return problems


def _shown(result: GradeResult, test_id: str) -> str:
    test = result.tests.get(test_id)
    if test is None:
        output = result.collect_errors[0] if result.collect_errors else result.output
        return f" (not run): {_clip(output)}"
    return f" ({test.outcome}): {_clip(test.text)}" if test.text else f" ({test.outcome})"


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= AUDIT_OUTPUT_CHARS else "..." + text[-AUDIT_OUTPUT_CHARS:]


def _page_context(raw: Any) -> dict[str, Any]:
    return {
        "snapshot": raw.get("snapshot") or "",
        "fail_to_pass": raw.get("fail_to_pass") or [],
        "pass_to_pass": raw.get("pass_to_pass") or [],
        "hidden_tests": sorted(raw.get("hidden_tests") or {}),
    }


def _harbor_folder(task: Any) -> dict[str, bytes]:
    from engine.repo_tasks.harbor import harbor_folder

    files = snapshots.read_files(task.read_snapshot(task.config.snapshot))
    return harbor_folder(key=task.key, prompt=task.prompt, answer=task.answer, spec=task.config, snapshot_files=files)


VERIFIER_KIND = VerifierKind(
    name=KIND,
    parse_config=parse_config,
    check=check,
    check_many=check_many,
    audit_task=audit_task,
    gameability="repository",
    page_fragment="curation/_repository.html",
    page_context=_page_context,
    exports=KindExports(harbor=_harbor_folder),
    examples_unavailable="grades a patch against a stored repository snapshot in the sandbox",
)
