"""exact, regex and numeric."""

import pytest

from engine.verifiers import verify


def outcome(verifier, completion, answer=None):
    return verify(verifier=verifier, completion=completion, answer=answer).outcome


# -- exact -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "completion", "answer", "expected"),
    [
        ({}, "Paris", "Paris", "pass"),
        ({}, "  Paris \n", "Paris", "pass"),
        ({}, "paris", "Paris", "fail"),
        ({"ignore_case": True}, "PARIS", "paris", "pass"),
        ({"whitespace": "exact"}, "Paris ", "Paris", "fail"),
        ({"whitespace": "collapse"}, "New   York\n", "New York", "pass"),
        ({"whitespace": "strip"}, "New  York", "New York", "fail"),
        ({"whitespace": "remove"}, "1 2 3", "123", "pass"),
        ({"extract": "last_line"}, "thinking...\nParis\n\n", "Paris", "pass"),
        ({"extract": "boxed"}, "so \\boxed{Paris} it is", "Paris", "pass"),
        ({"extract": "boxed"}, "Paris", "Paris", "fail"),
        ({"extract": "answer_tag"}, "<think>x</think><answer> Paris </answer>", "Paris", "pass"),
        ({"answers": ["Paris", "Paris, France"]}, "Paris, France", None, "pass"),
        ({"answers": ["Paris"]}, "", None, "fail"),
    ],
)
def test_exact(config, completion, answer, expected):
    assert outcome({"kind": "exact", **config}, completion, answer) == expected


# -- regex -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "completion", "expected"),
    [
        ({"pattern": r"\d+"}, "123", "pass"),
        ({"pattern": r"\d+"}, "123 apples", "fail"),
        ({"pattern": r"\d+", "mode": "match"}, "123 apples", "pass"),
        ({"pattern": r"\d+", "mode": "match"}, "apples 123", "fail"),
        ({"pattern": r"\d+", "mode": "search"}, "apples 123", "pass"),
        ({"pattern": r"answer: b", "mode": "search", "ignore_case": True}, "ANSWER: B", "pass"),
        ({"pattern": r"^b$", "mode": "search", "multiline": True}, "a\nb\nc", "pass"),
        ({"pattern": r"a.b", "dotall": True}, "a\nb", "pass"),
        ({"pattern": r"a.b"}, "a\nb", "fail"),
        ({"pattern": r"x+", "max_chars": 10}, "x" * 11, "fail"),
        ({"pattern": r" x", "strip": False}, " x", "pass"),
    ],
)
def test_regex(config, completion, expected):
    assert outcome({"kind": "regex", **config}, completion) == expected


# -- numeric ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("The answer is 1,000.", "1000", "pass"),
        ("1000", "1,000", "pass"),
        ("It is 1e3", "1000", "pass"),
        ("It is 1e3 metres", "1000", "fail"),  # a unit is part of the value (units: strict)
        ("It is 1e3 metres", "1000 m", "pass"),
        ("so 3/4 of the cake", "0.75", "pass"),
        ("$\\boxed{\\frac{3}{4}}$", "3/4", "pass"),
        ("It costs $5.50 in total", "$5.50", "pass"),
        ("12 km", "12 km", "pass"),
        ("Growth was 45%", "45", "fail"),  # 45% is 0.45
        ("Growth was 45%", "0.45", "pass"),
        ("Growth was 45%", "45%", "pass"),
        ("\u22127 degrees", "-7°", "pass"),
        ("The answer is not 7.", "7", "fail"),
        ("6*7", "42", "fail"),
        ("forty-two", "42", "pass"),
        ("#### 72", "72", "pass"),
        ("First 3 apples, then 4, so 7 in total.", "7", "pass"),
        ("First 3 apples, then 4, so 7 in total.", "3", "fail"),
        ("\\boxed{42}. Check: 6*7 = 42 and 40 + 2", "42", "pass"),
        ("no digits here", "3", "fail"),
        ("", "3", "fail"),
        ("1/0", "1", "fail"),
        ("1e999999999", "1", "fail"),
        ("9" * 50_000, "1", "fail"),
    ],
)
def test_numeric_reading(completion, answer, expected):
    assert outcome({"kind": "numeric"}, completion, answer) == expected


def test_numeric_tolerances():
    assert outcome({"kind": "numeric"}, "3.14159", "3.1416") == "fail"
    assert outcome({"kind": "numeric", "abs_tol": 1e-4}, "3.14159", "3.1416") == "pass"
    assert outcome({"kind": "numeric", "abs_tol": 0, "rel_tol": 0.01}, "101", "100") == "pass"
    assert outcome({"kind": "numeric", "abs_tol": 0, "rel_tol": 0.001}, "101", "100") == "fail"
    assert outcome({"kind": "numeric", "abs_tol": 0, "rel_tol": 0}, "0.1", "1/10") == "pass"


def test_numeric_whole_mode_needs_a_single_number():
    assert outcome({"kind": "numeric", "extract": "whole"}, " 1,000 ", "1000") == "pass"
    assert outcome({"kind": "numeric", "extract": "whole"}, "It is 1000", "1000") == "fail"


def test_numeric_units_may_be_ignored():
    assert outcome({"kind": "numeric", "units": "ignore"}, "Growth was 45%", "45") == "pass"
    assert outcome({"kind": "numeric", "units": "ignore"}, "It is 1e3 metres", "1000") == "pass"
    assert outcome({"kind": "numeric", "units": "ignore"}, "6*7", "42") == "fail"


def test_numeric_reference_that_is_not_a_number_is_an_error():
    verdict = verify(verifier={"kind": "numeric"}, completion="3", answer="a few")
    assert verdict.outcome == "error"
    assert "not a number" in verdict.detail


def test_numeric_detail_says_what_was_read():
    verdict = verify(verifier={"kind": "numeric"}, completion="... so 18 dollars", answer="20")
    assert "18" in verdict.detail and "20" in verdict.detail
