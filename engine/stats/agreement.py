"""Agreement between two raters of the same items: percent agreement, Cohen's kappa, false-pass rate.

Pure (numpy and scipy only). A rater is anything that gives a label to an item: an LLM judge, a
reviewer. Items come in as a table of counts ``{(first label, second label): items}`` (what a
database aggregate gives) or as two lists of labels, ``first[i]`` and ``second[i]`` for item i.

Every measure carries its sample size and an interval. Where the data cannot say (no items, or a
kappa whose chance agreement is 1 because both raters gave one and the same label to everything),
the estimate and interval are None and ``reason`` says why, never NaN.

Intervals: proportions (agreement, false-pass and false-fail rates) are Wilson score intervals.
Kappa's interval maps the Wilson interval of the observed agreement po through
kappa = (po - pe) / (1 - pe), holding the chance agreement pe fixed. That is the approximation
behind the usual standard error sqrt(po (1 - po) / (n (1 - pe)^2)), which is reported too, but
unlike po +- z SE it does not shrink to a point when every item agrees (po = 1), and it stays
inside [-1, 1].
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.stats.posterior import wilson_interval

__all__ = [
    "NOT_ENOUGH_DATA",
    "Agreement",
    "Kappa",
    "Proportion",
    "VerdictAgreement",
    "agreement_from_counts",
    "cohen_kappa",
    "false_pass_warning",
    "label_counts",
    "proportion",
    "verdict_agreement",
]

NOT_ENOUGH_DATA = "not enough data"
Label = TypeVar("Label", bound=Hashable)
Counts = Mapping[tuple[Any, Any], int]  # {(first label, second label): items}


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``n``: the estimate and its Wilson interval; None with a reason when n is 0."""

    successes: int
    n: int
    estimate: float | None
    low: float | None
    high: float | None
    reason: str = ""


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of n items: observed agreement ``observed`` (po), chance agreement ``chance`` (pe),
    the estimate, its standard error and interval; estimate and interval None with a reason when
    undefined (n is 0, or pe is 1)."""

    n: int
    observed: float | None
    chance: float | None
    estimate: float | None
    standard_error: float | None
    low: float | None
    high: float | None
    reason: str = ""


@dataclass(frozen=True)
class Agreement:
    """Two raters over the same n items: percent agreement and Cohen's kappa."""

    n: int
    agreement: Proportion
    kappa: Kappa


@dataclass(frozen=True)
class VerdictAgreement(Agreement):
    """A pass/fail rater checked against a reference rater (an LLM judge against people).

    ``false_pass``: of the items the checked rater passed, the share the reference failed;
    ``false_fail``: of the items it failed, the share the reference passed.
    """

    false_pass: Proportion
    false_fail: Proportion


def proportion(*, successes: int, n: int, level: float = 0.95) -> Proportion:
    """``successes`` of ``n`` with its Wilson interval; with n = 0, no estimate and NOT_ENOUGH_DATA."""
    if n == 0:
        return Proportion(successes=0, n=0, estimate=None, low=None, high=None, reason=f"{NOT_ENOUGH_DATA}: no items")
    low, high = wilson_interval(successes=successes, attempts=n, level=level)
    return Proportion(successes=successes, n=n, estimate=successes / n, low=low, high=high)


def label_counts(*, first: Sequence[Label], second: Sequence[Label]) -> dict[tuple[Label, Label], int]:
    """The table of counts of two raters' labels, item by item (``first[i]`` and ``second[i]``)."""
    if len(first) != len(second):
        raise ValueError(f"first and second must label the same items; got {len(first)} and {len(second)}")
    counts: dict[tuple[Label, Label], int] = {}
    for pair in zip(first, second):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def _check_counts(counts: Counts) -> int:
    for pair, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count of {pair!r} must be a non-negative integer; got {count!r}")
    return sum(counts.values())


def cohen_kappa(counts: Counts, *, level: float = 0.95) -> Kappa:
    """Cohen's kappa from a table of counts ``{(first label, second label): items}``.

    kappa = (po - pe) / (1 - pe), po the share of items both raters labelled alike, pe the
    agreement expected by chance from each rater's own label shares. Undefined (None, with a
    reason) for no items, or when pe = 1 (both raters gave every item one and the same label).
    """
    n = _check_counts(counts)
    if n == 0:
        return Kappa(0, None, None, None, None, None, None, reason=f"{NOT_ENOUGH_DATA}: no items")
    agreeing = sum(count for (first, second), count in counts.items() if first == second)
    first_totals: dict[Hashable, int] = {}
    second_totals: dict[Hashable, int] = {}
    for (first, second), count in counts.items():
        first_totals[first] = first_totals.get(first, 0) + count
        second_totals[second] = second_totals.get(second, 0) + count
    observed = agreeing / n
    chance = sum(total * second_totals.get(label, 0) for label, total in first_totals.items()) / n**2
    if chance >= 1.0 - 1e-12:
        return Kappa(
            n,
            observed,
            1.0,
            None,
            None,
            None,
            None,
            reason=f"{NOT_ENOUGH_DATA}: both raters gave every item the same label, so chance agreement is 1",
        )
    estimate = (observed - chance) / (1.0 - chance)
    standard_error = math.sqrt(observed * (1.0 - observed) / (n * (1.0 - chance) ** 2))
    observed_low, observed_high = wilson_interval(successes=agreeing, attempts=n, level=level)

    def mapped(value: float) -> float:
        return min(1.0, max(-1.0, (value - chance) / (1.0 - chance)))

    return Kappa(n, observed, chance, estimate, standard_error, mapped(observed_low), mapped(observed_high))


def agreement_from_counts(counts: Counts, *, level: float = 0.95) -> Agreement:
    """Percent agreement and Cohen's kappa of two raters from their table of counts."""
    n = _check_counts(counts)
    agreeing = sum(count for (first, second), count in counts.items() if first == second)
    return Agreement(
        n=n, agreement=proportion(successes=agreeing, n=n, level=level), kappa=cohen_kappa(counts, level=level)
    )


def verdict_agreement(
    counts: Counts, *, passed: Hashable = "pass", failed: Hashable = "fail", level: float = 0.95
) -> VerdictAgreement:
    """A checked rater (first label) against a reference rater (second label) on pass/fail verdicts.

    In: counts ``{(checked verdict, reference verdict): items}``. Out: agreement (accuracy, when the
    reference is right), kappa, the false-pass rate (reference ``failed`` among checked ``passed``)
    and the false-fail rate (reference ``passed`` among checked ``failed``), each with n and interval.
    """
    overall = agreement_from_counts(counts, level=level)

    def share(checked: Hashable, reference: Hashable) -> Proportion:
        of = sum(count for (first, _), count in counts.items() if first == checked)
        return proportion(successes=counts.get((checked, reference), 0), n=of, level=level)

    return VerdictAgreement(
        n=overall.n,
        agreement=overall.agreement,
        kappa=overall.kappa,
        false_pass=share(passed, failed),
        false_fail=share(failed, passed),
    )


def false_pass_warning(false_pass: Proportion, *, limit: float) -> str:
    """ "" when the false-pass rate's estimate is at or below ``limit`` (or unknown); "above" when the
    estimate is above it; "clearly above" when the interval's lower end is above it too.

    The point estimate decides, not the lower end: a warning costs a look and more reviews, while a
    judge that pays wrong answers, unnoticed until the evidence is conclusive, costs training runs.
    """
    if false_pass.estimate is None or false_pass.estimate <= limit:
        return ""
    return "clearly above" if false_pass.low is not None and false_pass.low > limit else "above"
