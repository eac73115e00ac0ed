"""The tampering battery on a second library's tasks (textkit, tests/engine/repo_tasks/second_library.py).

Its tests use parametrize, a test class, a fixture from conftest.py and setup.cfg's configuration, so
the renaming, the canaries copied into classes and the pristine ``-c`` configuration are exercised
on more than the tiny repository. The gameability audit flags the task whose hidden test an object
equal to anything satisfies (``x in (2.0,)``).
"""

import pytest

from engine.repo_tasks import snapshots
from engine.repo_tasks.grading import grade_many
from engine.repo_tasks.tampering import tampering_patches
from engine.verifiers.gameability import gameability_check
from tests.engine.repo_tasks.second_library import TASKS, WEAK
from tests.engine.repo_tasks.test_battery import TAMPERED

REPRESENTATIVE = (
    "replacing the tests' code through the caller's frame",
    "injecting always-equal names into the test module",
    "returning a str subclass equal to anything",
    "rewriting the test's expected value in its frame",
    "editing conftest.py under a quoted path",
    "pytest.toml loading a plug-in",
)


def _battery(task, *, only=None):
    battery = tampering_patches(task.files, test_files=list(task.spec.test_files))
    return [(label, patch) for label, patch in battery if only is None or label in only]


def _check(task, battery, tampered=TAMPERED):
    """The reference passes, no patch fails, every battery patch is refused: one grading call."""
    patches = [task.reference, ""] + [patch for _, patch in battery]
    reference, nothing, *results = grade_many(task=task.spec, snapshot=task.snapshot, patches=patches)
    assert reference.outcome == "pass", reference.detail + reference.output
    assert nothing.outcome == "fail" and task.spec.fail_to_pass[0] in nothing.detail, nothing.detail
    for (label, _), result in zip(battery, results, strict=True):
        assert result.outcome in ("fail", "tampered"), f"{task.name}, {label}: {result.outcome} {result.detail}"
        if label in tampered:
            assert result.outcome == "tampered", f"{task.name}, {label}: {result.outcome} {result.detail}"
            assert any(tampered[label] in line for line in result.evidence), f"{label}: {result.evidence}"


# The whole battery on the roman task goes through POST /api/v1/verify (tests/api/test_verify_repository.py).


@pytest.mark.parametrize("name", ["roman", "slug", "median"])
def test_a_representative_battery_is_refused_on_the_other_tasks(name):
    _check(TASKS[name], _battery(TASKS[name], only=REPRESENTATIVE))


def test_the_gameability_audit_flags_a_task_a_battery_patch_beats(monkeypatch):
    monkeypatch.setitem(snapshots._store, "loader", {WEAK.spec.snapshot: WEAK.snapshot}.__getitem__)
    verifier = {
        "kind": "repo_tests",
        "snapshot": WEAK.spec.snapshot,
        "fail_to_pass": list(WEAK.spec.fail_to_pass),
        "hidden_tests": WEAK.spec.hidden_tests,
        "timeout_seconds": 20,
    }
    findings = gameability_check(verifier=verifier, answer=f"```diff\n{WEAK.reference}```", prompt="Fix mean.")
    labels = {finding.label for finding in findings}
    assert "tampering: returning an object equal to anything" in labels, labels
    assert all(finding.outcome == "pass" for finding in findings)
