"""math, through math-verify in helper processes."""

import threading

import pytest

from engine.verifiers import verify

MATH = {"kind": "math"}


def outcome(completion, answer, **config):
    return verify(verifier={**MATH, **config}, completion=completion, answer=answer).outcome


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        ("The answer is $\\boxed{\\frac{3}{4}}$.", "0.75"),
        ("The answer is $\\boxed{0.75}$.", "\\frac{3}{4}"),
        ("So $x = \\boxed{\\dfrac{1}{2}}$", "1/2"),
        ("Therefore the answer is $2\\sqrt{2}$.", "\\sqrt{8}"),
        ("The solutions are $\\boxed{\\{1, 2\\}}$", "\\{2, 1\\}"),
        ("The interval is $\\boxed{[0, 1)}$", "[0, 1)"),
        ("The point is $\\boxed{(1, 2, 3)}$", "(1, 2, 3)"),
        ("We get $\\boxed{x^2 + 2x + 1}$", "(x+1)^2"),
        ("The final answer is 18", "18"),
        ("Answer: $\\pi/2$", "\\frac{\\pi}{2}"),
        ("\\boxed{1{,}000}", "1000"),
    ],
)
def test_equivalent_answers_pass(completion, answer):
    assert outcome(completion, answer) == "pass"


@pytest.mark.parametrize(
    ("completion", "answer"),
    [
        ("The answer is $\\boxed{\\frac{3}{5}}$.", "0.75"),
        ("The interval is $\\boxed{(0, 1)}$", "[0, 1)"),
        ("$\\boxed{x^2 + 1}$", "(x+1)^2"),
        ("I do not know.", "42"),
        ("", "42"),
    ],
)
def test_different_answers_fail(completion, answer):
    assert outcome(completion, answer) == "fail"


def test_final_answer_is_taken_from_a_long_chain_of_thought():
    steps = "\n".join(f"Step {i}: we compute {i} + {i} = {2 * i}." for i in range(1, 400))
    completion = f"{steps}\nPutting it together, the final answer is $\\boxed{{\\frac{{7}}{{3}}}}$."
    assert len(completion) > 10_000
    verdict = verify(verifier=MATH, completion=completion, answer="7/3")
    assert verdict.outcome == "pass"
    assert "last 10000 characters" in verdict.detail


def test_the_last_boxed_answer_wins_over_earlier_numbers():
    completion = "Try 5: no. Try $\\boxed{6}$: no. Finally $\\boxed{7}$."
    assert outcome(completion, "7") == "pass"
    assert outcome(completion, "6") == "fail"


def test_unparseable_reference_is_an_error():
    verdict = verify(verifier=MATH, completion="$\\boxed{1}$", answer="\\\\\\")
    assert verdict.outcome == "error"
    assert verdict.reward is None


def test_detail_names_the_extracted_answer():
    verdict = verify(verifier=MATH, completion="so $\\boxed{\\frac{1}{3}}$", answer="0.5")
    assert "\\frac{1}{3}" in verdict.detail


def _verify_in_thread(**kwargs):
    """Run verify in a non-main thread; fail the test if it never comes back."""
    results = []
    thread = threading.Thread(target=lambda: results.append(verify(**kwargs)), daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "verify did not return"
    return results[0]


def test_works_from_a_non_main_thread():
    verdict = _verify_in_thread(verifier=MATH, completion="$\\boxed{\\sqrt{2}}$", answer="2^{1/2}")
    assert verdict.outcome == "pass"


def test_many_threads_at_once():
    answers = [str(n) for n in range(12)]
    results = {}

    def work(answer):
        results[answer] = verify(
            verifier=MATH, completion=f"The answer is $\\boxed{{{answer}}}$", answer=answer
        ).outcome

    threads = [threading.Thread(target=work, args=(answer,)) for answer in answers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert results == {answer: "pass" for answer in answers}


def test_power_tower_is_bounded():
    # sympy would evaluate 10**(10**10) for minutes; the verdict must still come back.
    verdict = _verify_in_thread(
        verifier={**MATH, "timeout_seconds": 1}, completion="The answer is $\\boxed{10^{10^{10}}}$", answer="5"
    )
    assert verdict.outcome in ("timeout", "fail")
    assert verdict.reward != 1.0


def test_fifty_thousand_character_expression_is_bounded():
    expression = "+".join(["x"] * 25_000)
    verdict = _verify_in_thread(
        verifier={**MATH, "timeout_seconds": 1}, completion=f"The answer is $\\boxed{{{expression}}}$", answer="5"
    )
    assert len(expression) > 49_000
    assert verdict.outcome in ("timeout", "fail")


def test_fifty_thousand_character_expression_is_bounded_without_the_tail_cap():
    expression = "+".join(["1"] * 25_000)
    verdict = _verify_in_thread(
        verifier={**MATH, "timeout_seconds": 1, "max_completion_chars": 1_000_000},
        completion=f"$${expression}$$",
        answer="5",
    )
    assert verdict.outcome in ("timeout", "fail")


def test_the_helper_recovers_after_a_hard_kill():
    _verify_in_thread(verifier={**MATH, "timeout_seconds": 1}, completion="$\\boxed{9^{9^{9}}}$", answer="1")
    assert outcome("$\\boxed{4}$", "4") == "pass"


def test_risky_answers_go_to_the_helper_process_and_ordinary_ones_do_not():
    from engine.verifiers.kinds.math import needs_process

    for risky in [
        "10^{10^{10}}",
        "2^3^4",
        "x^{1000}",
        "(10^{10})!",
        "\\binom{100}{50}",
        "2**64",
        "\\sum_{k=1}^{n} k",
        "9" * 40,
    ]:
        assert needs_process(risky), risky
    for ordinary in [
        "\\frac{3}{4}",
        "x^2 + 2x + 1",
        "[0, 1)",
        "\\{1, 2\\}",
        "2\\sqrt{2}",
        "a \\neq b",
        "The answer is 18.",
    ]:
        assert not needs_process(ordinary), ordinary


@pytest.mark.parametrize("isolation", ["auto", "process"])
def test_both_isolation_modes_agree(isolation):
    config = {**MATH, "isolation": isolation}
    assert verify(verifier=config, completion="so $\\boxed{\\frac{1}{2}}$", answer="0.5").outcome == "pass"
    assert verify(verifier=config, completion="so $\\boxed{\\frac{1}{3}}$", answer="0.5").outcome == "fail"
    verdict = _verify_in_thread(
        verifier={**config, "timeout_seconds": 1}, completion="$\\boxed{10^{10^{10}}}$", answer="3"
    )
    assert verdict.outcome in ("timeout", "fail")
