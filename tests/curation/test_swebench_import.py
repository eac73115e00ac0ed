"""SWE-bench-style rows become repository tasks: JSON-encoded test lists, hidden tests from the
test patch, the local snapshot stored by hash, the audits; a bad row is refused naming line and field."""

import json

import pytest
from django.core.management import CommandError, call_command

from curation.models import TaskVersion
from engine.repo_tasks.grading import CaseResult, GradeResult
from engine.repo_tasks.patches import diff_files
from engine.repo_tasks.swebench import flaky
from tests.engine.repo_tasks.tiny_repo import FILES, HIDDEN_TESTS, REFERENCE_PATCH

pytestmark = pytest.mark.django_db


def write_rows(tmp_path, *rows):
    snapshots = tmp_path / "snapshots"
    for path, text in FILES.items():
        target = snapshots / "calc__calc-1" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    rows_path = tmp_path / "rows.jsonl"
    rows_path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows_path, snapshots


def swebench_row(**changes):
    row = {
        "instance_id": "calc__calc-1",
        "repo": "example/calc",
        "base_commit": "0123abcd",
        "problem_statement": "clamp() ignores its upper bound: clamp(5, 0, 3) gives 5.",
        "patch": REFERENCE_PATCH,
        "test_patch": diff_files(FILES, {**FILES, "tests/test_ops.py": HIDDEN_TESTS}),
        "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp_high"]),
        "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_add", "tests/test_more.py::test_add_negative"]),
        "version": "1.0",
        "environment_setup_commit": "0123abcd",
    }
    return {**row, **changes}


def test_a_swebench_row_becomes_an_audited_repository_task(tmp_path, alice, media):
    rows, snapshots = write_rows(tmp_path, swebench_row())
    call_command("import_swebench", str(rows), snapshots=str(snapshots), environment="swe", create=True, owner="alice")
    version = TaskVersion.objects.get(task__key="calc__calc-1")
    assert version.verifier["fail_to_pass"] == ["tests/test_ops.py::test_clamp_high"]
    assert version.verifier["hidden_tests"] == {"tests/test_ops.py": HIDDEN_TESTS}
    assert version.metadata["base_commit"] == "0123abcd"
    assert version.audit_passed, version.audit_problems


def test_a_bad_row_is_refused_naming_the_line_and_field_and_nothing_is_imported(tmp_path, alice, media):
    rows, snapshots = write_rows(
        tmp_path, swebench_row(), swebench_row(instance_id="calc__calc-2"), swebench_row(FAIL_TO_PASS="[not json")
    )
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_swebench", str(rows), snapshots=str(snapshots), environment="swe", create=True, owner="alice"
        )
    message = str(refused.value)
    assert "line 2, field instance_id: no snapshot 'calc__calc-2'" in message
    assert "line 3, field FAIL_TO_PASS: is not a JSON list of test ids" in message
    assert not TaskVersion.objects.exists()


def test_tests_whose_result_differs_between_two_runs_are_flaky():
    def run(**outcomes):
        return GradeResult("fail", "", tests={test: CaseResult(test, outcome) for test, outcome in outcomes.items()})

    first = run(a="passed", b="passed", c="failed")
    second = run(a="passed", b="failed", c="failed")
    assert flaky(first, second, ["a", "b", "c"]) == ["b"]
