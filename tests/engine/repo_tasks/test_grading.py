"""Grading a repository task in the sandbox: the reference passes, nothing else earns reward."""

from dataclasses import replace

import pytest

from engine.repo_tasks.grading import grade
from engine.repo_tasks.patches import diff_files
from engine.repo_tasks.tampering import tampering_patches
from engine.sandbox import Sandbox
from tests.engine.repo_tasks.tiny_repo import FILES, FIXED_OPS, HANGING_PATCH, REFERENCE_PATCH, SNAPSHOT, SPEC

BATTERY = tampering_patches(FILES, test_files=list(SPEC.test_files))
WITH_FIX = tampering_patches(FILES, test_files=list(SPEC.test_files), fixed={**FILES, "calc/ops.py": FIXED_OPS})
# With the real fix, these still fail: they break the run itself. The others pass, because the
# tampering was dropped or removed, or did nothing the honest fix did not already earn.
BREAK_THE_RUN = {
    "sys.exit(0) at import",
    "os._exit(0) in a module",
    "monkeypatching pytest's runtest from the code",
    "rewriting the tests while they run",
}


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


@pytest.mark.parametrize(("label", "patch"), BATTERY, ids=[label for label, _ in BATTERY])
def test_no_tampering_patch_passes(label, patch):
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=patch)
    assert result.outcome == "fail", f"{label}: {result.outcome} {result.detail}"
    assert "does not apply" not in result.detail, result.detail


@pytest.mark.parametrize(("label", "patch"), WITH_FIX, ids=[label for label, _ in WITH_FIX])
def test_tampering_riding_on_the_real_fix(label, patch):
    """The defences themselves (not the missing fix) are what made the battery fail above."""
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=patch)
    expected = "fail" if label in BREAK_THE_RUN else "pass"
    assert result.outcome == expected, f"{label}: {result.outcome} {result.detail}"


def test_in_the_fallback_isolation_grading_is_an_error_not_a_wrong_answer():
    """The fallback sandbox forbids starting processes: neither git nor pytest can run there."""
    fallback = Sandbox(isolation="fallback")
    try:
        with_patch = grade(task=SPEC, snapshot=SNAPSHOT, patch=REFERENCE_PATCH, sandbox=fallback)
        without = grade(task=SPEC, snapshot=SNAPSHOT, patch="", sandbox=fallback)
    finally:
        fallback.close()
    assert (with_patch.outcome, without.outcome) == ("error", "error")
    assert with_patch.detail.startswith("the grader could not run: git apply could not run")
