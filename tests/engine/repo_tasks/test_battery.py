"""The tampering battery through one sandbox run each, and the pieces that catch it, checked alone.

Every patch of the battery (patch-level and run-time attacks) is refused: ``fail`` naming the tests,
or ``tampered`` naming the evidence. The attacks on the tests themselves are ``tampered`` even riding
on the real fix (the checks, not the missing fix, stop them).
"""

from fractions import Fraction

import pytest
from _pytest.config.findpaths import CONFIG_LOADERS_BY_NAME

from engine.repo_tasks.grading import grade, grade_many, judge, run_in_sandbox
from engine.repo_tasks.hidden_tests import map_test_id, prepare
from engine.repo_tasks.patches import PYTEST_CONFIG_FILES, diff_files
from engine.repo_tasks.tampering import _disguise, tampering_patches
from engine.repo_tasks.test_guard import comparisons
from tests.engine.repo_tasks.tiny_repo import FILES, FIXED_OPS, SNAPSHOT, SPEC

# Run-time attacks on the tests or the comparisons: caught by the checks, whatever the fix.
TAMPERED = {
    "replacing the tests' code through the caller's frame": "is not the grader's",
    "replacing the tests' code through sys.modules": "is not the grader's",
    "replacing the tests' code found with gc": "is not the grader's",
    "injecting always-equal names into the test module": "the test module's globals changed",
    "replacing builtins the tests read": "the builtin AssertionError was replaced",
    "replacing the grader's comparison helpers in the test module": "the test module's globals changed",
    "a tracer that skips the asserts": "a tracer or profiler is installed",
    "injecting names into the test module at import": "holds names it does not define: list",
    "registering a pytest plug-in from the code": "a canary passed",
    "swallowing failures in pytest's CallInfo": "a canary passed",
    "forging pytest's reports": "a canary passed",
}


def test_the_battery_holds_at_least_forty_patches_of_every_class():
    labels = [label for label, _ in tampering_patches(FILES, test_files=list(SPEC.test_files))]
    assert len(labels) >= 40
    for expected in (*TAMPERED, "returning an object equal to anything", "pytest.toml loading a plug-in"):
        assert expected in labels
    assert any("quoted path" in label for label in labels)


def test_every_battery_patch_is_refused_naming_its_evidence():
    battery = tampering_patches(FILES, test_files=list(SPEC.test_files))
    results = grade_many(task=SPEC, snapshot=SNAPSHOT, patches=[patch for _, patch in battery])
    for (label, _), result in zip(battery, results, strict=True):
        assert result.outcome in ("fail", "tampered"), f"{label}: {result.outcome} {result.detail}"
        assert "does not apply" not in result.detail, f"{label}: {result.detail}"
        if label in TAMPERED:
            assert result.outcome == "tampered", f"{label}: {result.detail}"
            assert any(TAMPERED[label] in line for line in result.evidence), f"{label}: {result.evidence}"
        if result.outcome == "fail":
            assert "tests/test_ops.py::test_clamp_high" in result.detail or "did not finish" in result.detail


def test_run_time_tampering_riding_on_the_real_fix_is_still_tampered():
    fixed = {**FILES, "calc/ops.py": FIXED_OPS}
    battery = [
        (label, patch)
        for label, patch in tampering_patches(FILES, test_files=list(SPEC.test_files), fixed=fixed)
        if label in TAMPERED
    ]
    results = grade_many(task=SPEC, snapshot=SNAPSHOT, patches=[patch for _, patch in battery])
    for (label, _), result in zip(battery, results, strict=True):
        assert result.outcome == "tampered", f"{label}: {result.outcome} {result.detail}"


def test_quoted_paths_that_slip_past_the_filter_are_caught_by_git_and_the_tree():
    """The runner's own reading (git apply --numstat -z, the tree after applying) refuses a protected
    path even when the text filter is bypassed."""
    edited = {**FILES, "calc/ops.py": FIXED_OPS, "tests/test_more.py": FILES["tests/test_more.py"] + "\n# edited\n"}
    patch = _disguise(diff_files(FILES, edited))
    run, results = run_in_sandbox(task=SPEC, snapshot=SNAPSHOT, patches=[patch])
    result = judge(task=SPEC, result=results[0], dropped=(), patch_kept=True)
    assert result.outcome == "tampered", result.detail
    assert "tests/test_more.py (a test file)" in result.detail


def test_the_reference_still_passes_and_the_canaries_fail_quietly():
    result = grade(task=SPEC, snapshot=SNAPSHOT, patch=diff_files(FILES, {**FILES, "calc/ops.py": FIXED_OPS}))
    assert result.outcome == "pass", result.detail
    assert set(result.tests) >= set(SPEC.test_ids)


def test_pytest_reads_exactly_the_configuration_files_passband_protects():
    assert tuple(CONFIG_LOADERS_BY_NAME) == PYTEST_CONFIG_FILES


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


class Text(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


class PlainText(str):
    """A str subclass that keeps the builtin comparison: compared as a str."""


@pytest.mark.parametrize(
    ("actual", "expected", "equal"),
    [
        ("11th", "11th", True),
        (PlainText("11th"), "11th", True),
        (1, 1.0, True),
        (True, 1, True),
        ([1, (2, "x")], [1, (2, "x")], True),
        ({"a": [1]}, {"a": [1]}, True),
        (Fraction(1, 2), Fraction(2, 4), True),
        (0.1 + 0.2, pytest.approx(0.3), True),
        (AlwaysEqual(), "11th", False),
        ("11th", AlwaysEqual(), False),
        (Text("x"), "11th", False),
        ([AlwaysEqual()], ["11th"], False),
        ({"a": AlwaysEqual()}, {"a": 1}, False),
        (AlwaysEqual(), Fraction(1, 2), False),
        ([AlwaysEqual()], [Fraction(1, 2)], False),
        (Fraction(1, 2), 0.5, False),  # a plain expected value: the actual must be a plain value too
    ],
)
def test_strict_equality(actual, expected, equal):
    assert comparisons("!")["__passband_eq__"](actual, expected) is equal


def test_canary_values_differ_from_every_plain_value():
    wrong = comparisons("\u2063s")["__passband_wrong__"]
    for value in ("x", b"x", 3, 2.5, True, None, [1], (1,), {"a": 1}, {1}, frozenset({1})):
        assert wrong(value) != value and type(wrong(value)) is type(value) or value is None


def test_hidden_tests_are_renamed_with_canaries_and_mapped_back():
    source = FILES["tests/test_more.py"] + "\n\nclass TestMore:\n    def test_it(self):\n        assert 1 == 1\n"
    prepared = prepare(source, suffix="_pbx", canaries=["test_c1", "test_c2"], sentinel="!", seed=1)
    assert prepared.tests == {
        "test_add_negative_pbx": "test_add_negative",
        "TestMore_pbx.test_it_pbx": "TestMore.test_it",
    }
    assert sorted(prepared.canaries.values()) == ["TestMore.test_it", "test_add_negative"]
    names = {"TestMore_pbx": "TestMore", "test_it_pbx": "test_it"}
    mapped = map_test_id(
        "tests/test_more_pbx.py::TestMore_pbx::test_it_pbx",
        files={"tests/test_more_pbx.py": "tests/test_more.py"},
        names=names,
    )
    assert mapped == "tests/test_more.py::TestMore::test_it"
