"""Grading a repository task in the sandbox: the reference passes, nothing else earns reward."""

from dataclasses import replace

from engine.repo_tasks.grading import grade
from engine.repo_tasks.patches import diff_files
from engine.sandbox import Sandbox
from tests.engine.repo_tasks.tiny_repo import FILES, FIXED_OPS, HANGING_PATCH, REFERENCE_PATCH, SNAPSHOT, SPEC


def test_the_reference_patch_passes():
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=REFERENCE_PATCH)
    assert result.outcome == "pass", result.detail + result.output
    assert all(result.passed(test_id) for test_id in SPEC.test_ids)


def test_the_unpatched_repository_fails_and_names_the_test():
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch="")
    assert result.outcome == "fail"
    assert "tests/test_ops.py::test_clamp_high (failed)" in result.detail
    assert "assert 3 == 3" not in result.output and "test_clamp_high" in result.output


def test_a_fix_that_also_edits_the_tests_is_graded_without_the_test_edit():
    edited = {**FILES, "calc/ops.py": FIXED_OPS, "tests/test_more.py": "def test_add_negative():\n    assert False\n"}
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=diff_files(FILES, edited))
    assert result.outcome == "pass", result.detail
    assert result.dropped == ("tests/test_more.py (a test file)",)


def test_a_patch_that_does_not_apply_is_a_wrong_answer():
    patch = (
        "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n-def nothing_like_this():\n+def other():\n     pass\n"
    )
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=patch)
    assert result.outcome == "fail"
    assert result.detail.startswith("the patch does not apply")


def test_a_hanging_test_is_a_timeout():
    result = grade(task=replace(SPEC, timeout_seconds=3), snapshot=SNAPSHOT, patch=HANGING_PATCH)
    assert result.outcome == "timeout", result.detail


def test_a_sandbox_that_cannot_start_is_an_error_not_a_wrong_answer():
    broken = Sandbox(python="/nonexistent/python3")
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=REFERENCE_PATCH, sandbox=broken)
    assert result.outcome == "error"
    assert "sandbox" in result.detail


# The tampering battery, with and without the real fix: test_battery.py (one sandbox run for many patches).
