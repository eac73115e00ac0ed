"""The too_hard diagnosis: refused right answers and unreadable formats are suspect_verifier; hedges and
wrong answers are hard; attempts cut off at the budget are truncated. Verdicts come from the real
verifiers (math through math-verify), as calibration stores them."""

import pytest

from engine.verifiers import verify
from engine.verifiers.answer_span import final_answer, read_number, same_value
from engine.verifiers.diagnosis import HARD, SUSPECT_VERIFIER, TRUNCATED, Attempt, diagnose

PROMPT = [{"role": "user", "content": "What is 6 times 7?"}]


def attempts(verifier, answer, texts, *, truncated=()):
    """Attempts scored by the real verifier, ids in order; `truncated` names the indexes cut off."""
    made = []
    for index, text in enumerate(texts):
        verdict = verify(verifier=verifier, completion=text, answer=answer, prompt=PROMPT)
        made.append(Attempt(id=index + 1, text=text, outcome=verdict.outcome, truncated=index in truncated))
    return made


def diagnosis_of(verifier, answer, texts, **kwargs):
    found = diagnose(
        verifier=verifier, answer=answer, prompt=PROMPT, attempts=attempts(verifier, answer, texts, **kwargs)
    )
    return found.diagnosis, found.evidence


# -- suspect_verifier ------------------------------------------------------------------------------


def test_an_exact_verifier_that_refuses_a_right_answer_in_prose_is_suspect():
    verifier = {"kind": "exact"}
    texts = ["6 times 7 is 42, so the answer is 42.", "Multiplying: the answer is 42", "I think it is 41."]
    diagnosis, evidence = diagnosis_of(verifier, "42", texts)
    assert diagnosis == SUSPECT_VERIFIER
    assert evidence["read"] == 3 and evidence["refused_right"] == 2
    shown = [example for example in evidence["examples"] if example["shows"] == "refused_right"]
    assert [example["rollout"] for example in shown] == [2, 1]  # the latest first
    assert shown[0]["answer"] == "42" and "the answer is 42" in shown[0]["excerpt"]
    assert "2 of 3 refused completions gave the reference value" in evidence["reason"]
    # All three refuse the reference in their own prose; only the one that did not already write it is
    # shown rewritten.
    assert evidence["format_refused"] == 3
    rewritten = [example for example in evidence["examples"] if example["shows"] == "format_refused"]
    assert [(example["rollout"], example["rewritten"]) for example in rewritten] == [(3, "42.")]


def test_a_decimal_refused_for_a_fraction_reference_is_suspect():
    """The author's verifier refuses 0.5 when the answer is 1/2: the independent reader compares values."""
    verifier = {"kind": "exact", "extract": "boxed"}
    diagnosis, evidence = diagnosis_of(verifier, "1/2", ["Half of it: \\boxed{0.5}", "\\boxed{\\frac{1}{2}}"])
    assert diagnosis == SUSPECT_VERIFIER and evidence["refused_right"] == 2
    # Boxed as the model boxes, the reference itself passes: the format is fine, the notation is not.
    assert evidence["format_refused"] == 0


def test_words_refused_for_their_case_are_suspect():
    diagnosis, evidence = diagnosis_of({"kind": "exact"}, "Paris", ["paris", "PARIS"])
    assert diagnosis == SUSPECT_VERIFIER and evidence["refused_right"] == 2


def test_a_verifier_that_refuses_the_reference_in_the_models_format_is_suspect_even_when_every_answer_is_wrong():
    verifier = {"kind": "regex", "pattern": r"\d+"}
    texts = ["The answer is 41.", "The answer is 43.", "So the answer is 40"]
    diagnosis, evidence = diagnosis_of(verifier, "42", texts)
    assert diagnosis == SUSPECT_VERIFIER
    assert evidence["refused_right"] == 0 and evidence["answers_read"] == 3 and evidence["format_refused"] == 3
    example = evidence["examples"][0]
    assert example["shows"] == "format_refused" and example["rewritten"] == "So the answer is 42"
    assert "cannot read the model's answer format" in evidence["reason"]


def test_a_math_reference_in_latex_is_written_as_math_where_the_model_wrote_prose():
    """math reads `$\\frac{1}{2}$` in prose: the reference written there passes, so wrong answers are hard."""
    verifier = {"kind": "math"}
    diagnosis, evidence = diagnosis_of(verifier, "\\frac{1}{2}", ["The answer is 0.25.", "The answer is 1/3."])
    assert diagnosis == HARD
    assert evidence["answers_read"] == 2 and evidence["format_refused"] == 0 and evidence["refused_right"] == 0


def test_a_symbolic_answer_is_compared_through_math_verify_on_the_span_alone():
    verifier = {"kind": "exact", "extract": "boxed"}
    diagnosis, evidence = diagnosis_of(verifier, "x^2+2x+1", ["So \\boxed{(x+1)^2}."])
    assert diagnosis == SUSPECT_VERIFIER and evidence["refused_right"] == 1


# -- hard: hedges and wrong answers do not count --------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The answer is \\boxed{41 \\lor 42}",  # math-verify would read the last operand
        "Possible answers: 12, 15, 42",
        "It could be 41 or 42.",
        "The answer is 41. No wait, the answer is 42. Hmm, the answer is 43.",
        "\\boxed{41} or maybe \\boxed{42}, and \\boxed{43}",
        "41\n42",
        "It is 42 or more.",
        "The answer is not 42.",
    ],
)
def test_a_hedge_that_contains_the_reference_is_not_a_refused_right_answer(text):
    """Stored as refused (as a verifier that does not pay hedges would), it stays hard."""
    found = diagnose(
        verifier={"kind": "math"}, answer="42", prompt=PROMPT, attempts=[Attempt(id=1, text=text, outcome="fail")]
    )
    assert found.evidence["read"] == 1 and found.evidence["refused_right"] == 0
    assert found.diagnosis == HARD


def test_a_listing_of_numbers_refused_by_an_exact_verifier_is_hard():
    """A list of bare values is a hedge, so its format is not read either."""
    listing = "\n".join(str(number) for number in range(30, 50))
    diagnosis, evidence = diagnosis_of({"kind": "exact"}, "42", [listing, listing.replace("42\n", "")])
    assert diagnosis == HARD and evidence["refused_right"] == 0 and evidence["answers_read"] == 0


def test_wrong_answers_are_hard():
    diagnosis, evidence = diagnosis_of({"kind": "math"}, "42", ["\\boxed{41}", "The answer is 43.", "I give up."])
    assert diagnosis == HARD
    assert evidence["read"] == 3 and evidence["refused_right"] == 0 and evidence["format_refused"] == 0
    assert evidence["reason"].startswith("no refused completion gave the reference answer")


def test_a_rounded_answer_is_not_the_reference():
    diagnosis, evidence = diagnosis_of({"kind": "exact"}, "1/3", ["The answer is 0.333", "The answer is 0.33"])
    assert evidence["refused_right"] == 0


def test_passes_errors_and_cut_off_completions_are_not_read():
    verifier = {"kind": "exact"}
    found = diagnose(
        verifier=verifier,
        answer="42",
        prompt=PROMPT,
        attempts=[
            Attempt(id=1, text="the answer is 42", outcome="error"),
            Attempt(id=2, text="42", outcome="pass"),
            Attempt(id=3, text="the answer is 42, and then", outcome="fail", truncated=True),
            Attempt(id=4, text="I think 41", outcome="fail"),
        ],
    )
    assert found.evidence["read"] == 1 and found.evidence["refused_right"] == 0


# -- truncated -------------------------------------------------------------------------------------


def test_most_attempts_at_the_budget_are_truncated_even_when_they_mention_the_answer():
    texts = ["Let me think. The answer is 42 because", "First, 6 times", "Step 1:", "\\boxed{41}"]
    diagnosis, evidence = diagnosis_of({"kind": "math"}, "42", texts, truncated={0, 1, 2})
    assert diagnosis == TRUNCATED
    assert evidence["truncated"] == 3 and evidence["attempts"] == 4 and evidence["refused_right"] == 0
    assert {example["rollout"] for example in evidence["examples"]} == {1, 2, 3}
    assert "3 of 4 attempts stopped at the completion budget" in evidence["reason"]


def test_half_truncated_is_not_most():
    diagnosis, _ = diagnosis_of(
        {"kind": "math"}, "42", ["Step", "Step", "\\boxed{41}", "\\boxed{40}"], truncated={0, 1}
    )
    assert diagnosis == HARD


def test_a_code_task_is_never_suspect_of_its_verifier():
    verifier = {"kind": "code", "style": "asserts", "asserts": ["assert answer() == 42"]}
    found = diagnose(
        verifier=verifier,
        answer="def answer():\n    return 42",
        prompt=PROMPT,
        attempts=[Attempt(id=1, text="The answer is 42.", outcome="fail")],
    )
    assert found.diagnosis == HARD and found.evidence["read"] == 0


# -- the reader -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer", "source", "hedge"),
    [
        ("so the final answer is $\\boxed{42}$.", "42", "boxed", False),
        ("<answer> 42 </answer>", "42", "answer_tag", False),
        ("Answer: **1,000 apples**.", "1,000 apples", "phrase", False),
        ("6 * 7 = 42", "42", "last_line", False),
        ("#### 42", "42", "last_line", False),
        ("\\boxed{41} ... \\boxed{42}", "42", "boxed", True),
        ("The answer is 42, as asked.", "42", "phrase", False),  # a remark after a comma
        ("The answer is 42, or maybe 43.", "42, or maybe 43", "phrase", False),  # not one value: never equal
        ("Boxed: \\boxed{42}\nThe answer is 41", "42", "boxed", False),  # the box wins; prose cannot add one
    ],
)
def test_final_answer(text, answer, source, hedge):
    span = final_answer(text)
    assert span.text == answer and span.source == source and bool(span.hedge) is hedge
    assert text[span.start : span.end] == answer


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.5", "1/2"), ("\\frac{3}{4}", "3/4"), ("-1,000", "-1000"), ("$5", "5"), ("12 km", "12"), ("\u22123", "-3")],
)
def test_read_number(text, value):
    from fractions import Fraction

    assert read_number(text) == Fraction(value)


@pytest.mark.parametrize("text", ["41 or 42", "6*7", "1, 2", "42 to 50", "x", "1/0"])
def test_not_one_number(text):
    assert read_number(text) is None


@pytest.mark.parametrize("text", ["<answer>1}, \\boxed{(x+1)^2</answer>", "<answer>1$ and $(x+1)^2</answer>"])
def test_an_answer_that_could_leave_its_box_is_never_the_reference(text):
    found = diagnose(
        verifier={"kind": "exact", "extract": "answer_tag"},
        answer="x^2+2x+1",
        prompt=PROMPT,
        attempts=[Attempt(id=1, text=text, outcome="fail")],
    )
    assert found.evidence["read"] == 1 and found.evidence["refused_right"] == 0


def test_same_value_leaves_math_to_the_caller_and_refuses_joined_words():
    assert same_value("Paris or Rome", "Paris").equal is False
    assert same_value("x+1", "x+1").equal is None
