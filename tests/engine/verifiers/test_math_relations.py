"""math: relations, sets and logic operators are judged by value; only hedges are refused.

A hedge gives several candidate values where one is asked; it must fail even though math-verify
would read it as one of them. Every legitimate form has a hedge beside it.
"""

import pytest

from engine.verifiers import verify

MATH = {"kind": "math"}


def outcome(completion: str, answer: str, prompt: str | None = None, **config) -> str:
    return verify(verifier={**MATH, **config}, completion=completion, answer=answer, prompt=prompt).outcome


LEGITIMATE = [
    # unions and other set expressions
    ("$\\boxed{\\{1\\}\\cup\\{2\\}}$", "\\{1, 2\\}"),
    ("$\\boxed{[0, 1) \\cup (2, 3]}$", "[0, 1) \\cup (2, 3]"),
    ("$z \\in \\left[-\\frac{3}{2}, -1\\right] \\cup \\left[1, \\frac{3}{2}\\right]$", "1\\leq|z|\\leq \\frac{3}{2}"),
    ("The solutions are $\\boxed{\\{2, 3\\}}$", "\\{2, 3\\}"),
    ("$\\boxed{x=2 \\text{ or } x=3}$", "\\{2, 3\\}"),
    # intervals and inequalities
    ("$\\boxed{(0, 1)}$", "0<f(x)<1"),
    ("Therefore $x \\geq 5$ is the solution.", "x >= 5"),
    ("$\\boxed{-2 \\le x \\le 7}$", "-2 \\le x \\le 7"),
    # name = value, probability statements, limits as equations
    ("$\\boxed{A\\cap B=\\{2\\}}$", "\\{2\\}"),
    ("So $P(A\\mid B)=1/3$.", "1/3"),
    ("Hence $P(A|B) = \\frac{1}{3}$", "\\frac{1}{3}"),
    ("$\\lim_{x\\to 0}\\frac{\\sin x}{x} = 1$", "1"),
    ("$\\boxed{f(2) = 7}$", "7"),
    ("The answer is $x=5$", "5"),
    # approximations after the exact value
    ("$\\boxed{x = \\frac{1}{3} \\approx 0.33}$", "1/3"),
    ("$\\boxed{x \\approx 11}$", "11"),
    # decimal commas and upright e
    ("$\\boxed{1.22}$", "1,22"),
    ("$\\boxed{1 - \\frac{1}{\\mathrm{e}}}$", "1 - \\frac{1}{e}"),
]

HEDGES = [
    ("$\\boxed{x=2 \\text{ or } x=3}$", "2"),
    ("$\\boxed{x=2 \\text{ or } x=3}$", "3"),
    ("$x=2$ or $x=3$", "3"),
    ("$\\boxed{x = 2 \\lor x = 3}$", "3"),
    ("$\\boxed{1 \\le x \\le 100}$", "50"),
    ("$\\boxed{1 \\le x \\le 100}$", "100"),
    ("$\\boxed{x \\in [1, 2]}$", "1"),
    ("$\\boxed{41 \\cup 42}$", "42"),
    ("$\\boxed{\\{41\\} \\cup \\{42\\}}$", "42"),
    ("$\\boxed{41, 42}$", "42"),
    ("$\\boxed{41 \\lor 42}$", "42"),
    ("$\\boxed{41 \\mid 42}$", "42"),
    ("$\\boxed{41 \\approx 42}$", "42"),
    ("$\\boxed{P(A\\mid B) = 1/3 \\lor 1/2}$", "1/2"),
    ("$\\boxed{A\\cap B=\\{2\\} \\cup \\{3\\}}$", "\\{2\\}"),
    ("$\\boxed{\\lim_{x\\to 0}\\frac{\\sin x}{x}}$", "1"),
    ("$\\boxed{1 + \\frac{1}{\\mathrm{e}}}$", "1 - \\frac{1}{\\mathrm{e}}"),
    ("$\\boxed{1}$", "1 - \\frac{1}{\\mathrm{e}}"),
]


@pytest.mark.parametrize(("completion", "answer"), LEGITIMATE)
def test_legitimate_forms_are_judged_by_value(completion, answer):
    assert outcome(completion, answer) == "pass"


@pytest.mark.parametrize(("completion", "answer"), HEDGES)
def test_hedges_are_still_refused(completion, answer):
    assert outcome(completion, answer) == "fail"


def test_a_hedge_names_why_it_failed():
    verdict = verify(verifier=MATH, completion="$\\boxed{1 \\le x \\le 100}$", answer="50")
    assert "several values" in verdict.detail
    verdict = verify(verifier=MATH, completion="$\\boxed{41 \\cup 42}$", answer="42")
    assert "\\cup" in verdict.detail


def test_the_value_of_an_equation_is_still_checked_against_the_question():
    prompt = "What is 17 + 25?"
    assert outcome("$\\boxed{x = 17 + 25}$", "42", prompt) == "fail"
    assert outcome("$\\boxed{x = 17 + 25 = 42}$", "42", prompt) == "pass"
    assert outcome("$\\boxed{17 + 25 \\approx 40}$", "40", prompt) == "fail"


def test_a_wrong_value_after_a_name_fails():
    assert outcome("So $P(A\\mid B)=1/2$.", "1/3") == "fail"
    assert outcome("$\\boxed{A\\cap B=\\{3\\}}$", "\\{2\\}") == "fail"
    assert outcome("$\\lim_{x\\to 0}\\frac{\\sin x}{x} = 0$", "1") == "fail"


def test_extraction_can_be_limited_to_latex():
    assert outcome("The answer is $(1, 2)$", "(1,2)", extraction=["latex"]) == "pass"
    assert outcome("The answer is (1, 2)", "(1,2)", extraction=["latex"]) == "fail"
    # A number reference is read by the committed-answer reader (answer_span), which extraction does not limit.
    assert outcome("The answer is 9", "9", extraction=["latex"]) == "pass"


def test_set_relation_comparison_is_math_verifys_option():
    assert outcome("$-2 \\le x \\le 7$", "x \\in [-2,7]") == "fail"
    assert outcome("$-2 \\le x \\le 7$", "x \\in [-2,7]", allow_set_relation_comp=True) == "pass"


@pytest.mark.parametrize(
    ("field", "value"),
    [("extraction", []), ("extraction", ["words"]), ("extraction", "latex"), ("allow_set_relation_comp", "yes")],
)
def test_bad_new_fields_are_named(field, value):
    from engine.verifiers import VerifierConfigError, validate_config

    with pytest.raises(VerifierConfigError) as raised:
        validate_config({"kind": "math", field: value})
    assert raised.value.field == field


def test_plain_integer_references_are_read_as_math_verify_reads_them():
    import math_verify

    from engine.verifiers.math_worker import _reference

    for text in ("0", "7", "-5", "18", "1547", "-100000", "123456789012345", " 42 "):
        assert _reference(text, math_verify.parse) == math_verify.parse(f"${text.strip()}$"), text
    assert _reference("004", math_verify.parse) == math_verify.parse("$004$")  # not the fast path
