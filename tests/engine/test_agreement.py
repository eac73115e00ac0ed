"""engine.stats.agreement: percent agreement, Cohen's kappa and the false-pass rate, with sklearn as the oracle."""

import math
import random

import pytest
from sklearn.metrics import cohen_kappa_score

from engine.stats import (
    NOT_ENOUGH_DATA,
    agreement_from_counts,
    band_agreement,
    cohen_kappa,
    false_pass_warning,
    label_counts,
    proportion,
    verdict_agreement,
    wilson_interval,
)


def counts_of(first, second):
    return label_counts(first=first, second=second)


@pytest.mark.parametrize("seed", range(12))
def test_kappa_matches_sklearn_on_random_raters(seed):
    generator = random.Random(seed)
    labels = ["pass", "fail", "skip"][: generator.choice([2, 3])]
    n = generator.randint(5, 300)
    first = [generator.choice(labels) for _ in range(n)]
    # The second rater copies the first most of the time, so kappa spans weak to strong agreement.
    copy = generator.random()
    second = [label if generator.random() < copy else generator.choice(labels) for label in first]
    if len(set(first)) == 1 and set(first) == set(second):
        pytest.skip("both raters constant: sklearn gives NaN here; covered by the degenerate test")
    kappa = cohen_kappa(counts_of(first, second))
    assert kappa.n == n
    assert kappa.estimate == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)
    assert kappa.observed == pytest.approx(sum(a == b for a, b in zip(first, second)) / n)


def test_kappa_of_a_known_table_with_its_standard_error():
    # 20 pass/pass, 5 pass/fail, 10 fail/pass, 15 fail/fail: po = 0.7, pe = 0.5, kappa = 0.4.
    counts = {("pass", "pass"): 20, ("pass", "fail"): 5, ("fail", "pass"): 10, ("fail", "fail"): 15}
    kappa = cohen_kappa(counts)
    assert (kappa.observed, kappa.chance, kappa.estimate) == pytest.approx((0.7, 0.5, 0.4))
    assert kappa.standard_error == pytest.approx(math.sqrt(0.7 * 0.3 / (50 * 0.25)))
    assert kappa.low < kappa.estimate < kappa.high


def test_kappa_interval_is_near_the_normal_one_for_a_large_sample_and_maps_wilson():
    counts = {("pass", "pass"): 4000, ("pass", "fail"): 1000, ("fail", "pass"): 2000, ("fail", "fail"): 3000}
    kappa = cohen_kappa(counts)
    assert kappa.low == pytest.approx(kappa.estimate - 1.959964 * kappa.standard_error, abs=1e-3)
    assert kappa.high == pytest.approx(kappa.estimate + 1.959964 * kappa.standard_error, abs=1e-3)
    low, high = wilson_interval(successes=7000, attempts=10000)
    assert (kappa.low, kappa.high) == pytest.approx(((low - 0.5) / 0.5, (high - 0.5) / 0.5))


def test_perfect_agreement_keeps_an_interval_wider_than_a_point():
    kappa = cohen_kappa({("pass", "pass"): 6, ("fail", "fail"): 4})
    assert kappa.estimate == pytest.approx(cohen_kappa_score(["pass"] * 6 + ["fail"] * 4, ["pass"] * 6 + ["fail"] * 4))
    assert kappa.standard_error == 0.0  # the normal approximation collapses here ...
    assert kappa.high == 1.0 and kappa.low < 0.7  # ... the Wilson-mapped interval does not
    assert -1.0 <= kappa.low


def test_kappa_with_no_items_or_chance_agreement_of_one_says_not_enough_data():
    empty = cohen_kappa({})
    assert empty.n == 0 and empty.estimate is None and empty.low is None and empty.reason.startswith(NOT_ENOUGH_DATA)
    constant = cohen_kappa({("pass", "pass"): 9})
    assert constant.n == 9 and constant.chance == 1.0
    assert constant.estimate is None and constant.standard_error is None and constant.high is None
    assert constant.reason.startswith(NOT_ENOUGH_DATA) and "same label" in constant.reason
    # Always the same label on one side only is defined: kappa 0 (sklearn agrees).
    one_sided = cohen_kappa({("pass", "pass"): 3, ("pass", "fail"): 2})
    assert one_sided.estimate == pytest.approx(cohen_kappa_score(["pass"] * 5, ["pass"] * 3 + ["fail"] * 2))


def test_counts_must_be_non_negative_integers_and_lists_the_same_length():
    with pytest.raises(ValueError, match="non-negative integer"):
        cohen_kappa({("pass", "pass"): -1})
    with pytest.raises(ValueError, match="non-negative integer"):
        agreement_from_counts({("pass", "pass"): 1.5})
    with pytest.raises(ValueError, match="same items"):
        label_counts(first=["pass"], second=[])


def test_percent_agreement_is_a_proportion_with_wilson_interval():
    result = agreement_from_counts({("a", "a"): 8, ("a", "b"): 2})
    assert result.n == 10
    assert (result.agreement.successes, result.agreement.n, result.agreement.estimate) == (8, 10, 0.8)
    assert (result.agreement.low, result.agreement.high) == tuple(wilson_interval(successes=8, attempts=10))
    empty = proportion(successes=0, n=0)
    assert empty.estimate is None and empty.reason.startswith(NOT_ENOUGH_DATA)


def test_verdict_agreement_counts_false_passes_among_the_judges_passes():
    judge = ["pass"] * 10 + ["fail"] * 10
    people = ["pass"] * 7 + ["fail"] * 3 + ["fail"] * 9 + ["pass"]
    result = verdict_agreement(counts_of(judge, people))
    assert result.n == 20
    assert result.agreement.estimate == pytest.approx(16 / 20)
    assert result.kappa.estimate == pytest.approx(cohen_kappa_score(judge, people))
    assert (result.false_pass.successes, result.false_pass.n, result.false_pass.estimate) == (3, 10, 0.3)
    assert (result.false_pass.low, result.false_pass.high) == tuple(wilson_interval(successes=3, attempts=10))
    assert (result.false_fail.successes, result.false_fail.n) == (1, 10)


def test_a_judge_that_never_passed_has_no_false_pass_rate():
    result = verdict_agreement({("fail", "fail"): 4, ("fail", "pass"): 1})
    assert result.false_pass.n == 0 and result.false_pass.estimate is None
    assert result.false_pass.reason.startswith(NOT_ENOUGH_DATA)
    assert false_pass_warning(result.false_pass, limit=0.05) == ""


def test_the_warning_compares_the_estimate_and_says_when_the_interval_clears_the_limit():
    at_limit = proportion(successes=5, n=100)
    assert false_pass_warning(at_limit, limit=0.05) == ""
    above = proportion(successes=1, n=10)  # 0.1, but the interval reaches down to about 0.018
    assert false_pass_warning(above, limit=0.05) == "above"
    clearly = proportion(successes=30, n=100)
    assert false_pass_warning(clearly, limit=0.05) == "clearly above"
    assert false_pass_warning(proportion(successes=0, n=40), limit=0.05) == ""


def test_band_agreement_uses_the_same_kappa():
    first = ["in_band", "in_band", "retire", "too_hard", "undecided"]
    second = ["in_band", "retire", "retire", "too_hard", "in_band"]
    result = band_agreement(first=first, second=second)
    assert result.tasks == 4
    assert result.cohen_kappa == pytest.approx(cohen_kappa_score(first[:4], second[:4]))
