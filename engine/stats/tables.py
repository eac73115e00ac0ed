"""The stopping rule as a table, and its exact operating characteristic.

A ``StoppingTable`` lists, for every round boundary and every pass count, what ``assess`` does
there. Passing the pass-count distribution through it gives, for any true pass rate, the exact
probability of each final label and the mean rollouts spent (``operating_characteristic``; the
vectorised ``operating_characteristic_curve`` feeds the dashboard's chart and the benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.stats.bands import (
    BORDERLINE,
    CONTINUE,
    LABELS,
    Band,
    Thresholds,
    acceptable_bands,
    band_for_rate,
)
from engine.stats.posterior import JEFFREYS_PRIOR, _check_prior
from engine.stats.sequential import (
    SamplingPolicy,
    decision_codes,
    propagate,
    round_schedule,
)

__all__ = [
    "OperatingCharacteristic",
    "OperatingCharacteristicCurve",
    "StoppingTable",
    "operating_characteristic",
    "operating_characteristic_curve",
    "stopping_table",
    "table_from_lists",
    "table_to_lists",
]


@dataclass(frozen=True)
class StoppingTable:
    """The whole stopping rule as a table, for simulation and exact error rates.

    ``attempts[k]`` is the number of rollouts after round k; ``labels[k][s]`` is the code
    (index into LABELS, or CONTINUE) that ``assess`` gives for s passes at that point.
    The last round never continues: it decides, or labels borderline (adaptive, and fixed with
    interval labels: not decided after N) or by the raw pass rate (fixed with raw labels).
    """

    attempts: tuple[int, ...]
    labels: tuple[np.ndarray, ...]


def table_to_lists(table: StoppingTable) -> list[list[int]]:
    """A table as plain lists (JSON, a cache): its schedule first, then each round's codes."""
    return [list(table.attempts)] + [[int(code) for code in codes] for codes in table.labels]


def table_from_lists(rows: Sequence[Sequence[int]]) -> StoppingTable:
    """``table_to_lists`` reversed; raises ``ValueError`` when a round's codes do not fit its attempts."""
    attempts, *codes = rows
    if len(codes) != len(attempts) or any(len(row) != n + 1 for row, n in zip(codes, attempts)):
        raise ValueError("a stopping table needs one row of attempts + 1 codes per round")
    return StoppingTable(
        attempts=tuple(int(n) for n in attempts), labels=tuple(np.asarray(row, dtype=np.int8) for row in codes)
    )


def stopping_table(
    *, thresholds: Thresholds, policy: SamplingPolicy, prior: Sequence[float] = JEFFREYS_PRIOR
) -> StoppingTable:
    """Tabulate ``assess`` at every round boundary of ``policy`` for every possible pass count."""
    prior = _check_prior(prior)
    labels: list[np.ndarray] = []
    schedule = round_schedule(policy)
    for attempts in schedule:
        successes = np.arange(attempts + 1)
        if policy.kind == "fixed" and policy.labels == "raw":
            rate = successes / attempts
            codes = np.where(rate < thresholds.floor, 0, np.where(rate < thresholds.retire_at, 1, 2))
        else:
            codes = decision_codes(
                successes=successes, attempts=attempts, thresholds=thresholds, policy=policy, prior=prior
            )
            # At the cap (adaptive) or after N (fixed, interval labels), undecided is the borderline code.
            if policy.kind == "fixed" or attempts >= policy.cap:
                codes = np.where(codes == CONTINUE, LABELS.index(BORDERLINE), codes)
        labels.append(codes.astype(np.int8))
    return StoppingTable(attempts=tuple(schedule), labels=tuple(labels))


@dataclass(frozen=True)
class OperatingCharacteristic:
    """Exact behaviour of a policy for one true pass rate.

    ``label_probabilities`` maps too_hard, in_band, retire and borderline to the probability of
    ending with that label; ``expected_attempts`` is the mean number of rollouts spent.
    """

    pass_rate: float
    label_probabilities: dict[str, float]
    expected_attempts: float

    def error(self, *, thresholds: Thresholds) -> float:
        """Probability of ending with any label other than the true band (borderline counts)."""
        truth = band_for_rate(pass_rate=self.pass_rate, thresholds=thresholds)
        return 1.0 - self.label_probabilities[truth]


def _check_rate(pass_rate: float) -> None:
    if not 0.0 <= pass_rate <= 1.0:
        raise ValueError(f"pass_rate must lie in [0, 1]; got {pass_rate}")


def operating_characteristic(
    *,
    pass_rate: float,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    table: StoppingTable | None = None,
) -> OperatingCharacteristic:
    """Exact label probabilities and expected rollouts when the true pass rate is ``pass_rate``.

    Propagates the distribution of the pass count round by round through the stopping table (no
    simulation). Pass ``table`` to reuse one across many pass rates.
    """
    _check_rate(pass_rate)
    table = table or stopping_table(thresholds=thresholds, policy=policy, prior=prior)
    label_mass, expected = propagate(schedule=table.attempts, codes=table.labels, pass_rates=np.array([pass_rate]))
    return OperatingCharacteristic(
        pass_rate=pass_rate,
        label_probabilities={label: float(mass) for label, mass in zip(LABELS, label_mass[0])},
        expected_attempts=float(expected[0]),
    )


@dataclass(frozen=True)
class OperatingCharacteristicCurve:
    """A policy's exact behaviour over a grid of true pass rates: what its confidence buys.

    Per pass rate: ``label_probabilities[label]`` (too_hard, in_band, retire, borderline),
    ``wrong`` (the probability of a label the zones do not accept: inside a zone either
    neighbouring band is right, borderline is wrong everywhere), and ``expected_attempts``.
    Lists of floats, ready for JSON and plotly.
    """

    pass_rates: list[float]
    label_probabilities: dict[str, list[float]]
    wrong: list[float]
    expected_attempts: list[float]


def operating_characteristic_curve(
    *,
    thresholds: Thresholds,
    policy: SamplingPolicy,
    prior: Sequence[float] = JEFFREYS_PRIOR,
    pass_rates: Sequence[float] | None = None,
    table: StoppingTable | None = None,
) -> OperatingCharacteristicCurve:
    """The operating-characteristic curve of a policy, exactly (no simulation).

    ``pass_rates`` defaults to 0 to 1 with extra points near the floor, where the curve bends.
    """
    if pass_rates is None:
        near_floor = np.linspace(0.0, min(1.0, 5 * thresholds.floor_zone[1]), 61)
        rates = np.unique(np.round(np.concatenate([near_floor, np.linspace(0.0, 1.0, 101)]), 6))
    else:
        rates = np.asarray(pass_rates, dtype=float)
    for rate in rates:
        _check_rate(float(rate))
    table = table or stopping_table(thresholds=thresholds, policy=policy, prior=prior)
    label_mass, expected = propagate(schedule=table.attempts, codes=table.labels, pass_rates=rates)
    right = np.zeros(rates.size)
    for index, rate in enumerate(rates):
        for band in acceptable_bands(pass_rate=float(rate), thresholds=thresholds):
            right[index] += label_mass[index, LABELS.index(Band(band))]
    return OperatingCharacteristicCurve(
        pass_rates=rates.tolist(),
        label_probabilities={str(label): label_mass[:, index].tolist() for index, label in enumerate(LABELS)},
        wrong=np.clip(1.0 - right, 0.0, 1.0).tolist(),
        expected_attempts=expected.tolist(),
    )
