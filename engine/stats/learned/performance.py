"""How a stopping table behaves on a population: mean rollouts, error outside the zones, error per slice.

In: a ``StoppingTable``, a ``Population`` (or plausible populations) and the thresholds. Out: a
``Performance``, exact (``propagate``), and for the harm check an (error, bound) pair or None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.stats.bands import LABELS, Thresholds, acceptable_bands
from engine.stats.learned.population import PlausibleRegion, Population, most_damaging_together
from engine.stats.sequential import propagate
from engine.stats.tables import StoppingTable

__all__ = [
    "Performance",
    "error_slices",
    "mixed_performance",
    "table_performance",
    "worst_performance",
]

# The error a release promises outside the zones, where the calibrated rule itself does no worse.
PROMISED_ERROR = 0.01


def error_slices(thresholds: Thresholds) -> list[tuple[str, float, float]]:
    """Slices of true pass rate outside the zones, each held to its own error limit.

    At the default thresholds: 0, (0, 1%), [4%, 7%), [7%, 10%), [10%, 20%), [20%, 40%),
    [40%, 60%), [80%, 90%), [90%, 100%] (the benchmark's slices). (low, low) is the single rate 0.
    """
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    cuts = [floor_high, 1.75 * floor_high, 2.5 * floor_high, 5.0 * floor_high, 10.0 * floor_high, retire_low]
    cuts = [cuts[0]] + [cut for cut in cuts[1:-1] if cuts[0] < cut < retire_low] + [retire_low]
    slices = [("0", 0.0, 0.0)]
    if floor_low > 0:
        slices.append((f"(0, {floor_low:g})", 0.0, floor_low))
    slices += [(f"[{low:g}, {high:g})", low, high) for low, high in zip(cuts[:-1], cuts[1:])]
    if retire_high < 1.0:
        middle = (retire_high + 1.0) / 2.0
        slices += [(f"[{retire_high:g}, {middle:g})", retire_high, middle), (f"[{middle:g}, 1]", middle, 1.0 + 1e-12)]
    return slices


def _slice_masks(rates: np.ndarray, thresholds: Thresholds) -> list[np.ndarray]:
    masks = []
    for _, low, high in error_slices(thresholds):
        if low == high:
            masks.append(rates == low)
        else:
            masks.append(((rates > low) if low == 0.0 else (rates >= low)) & (rates < high))
    return masks


def _outside_zones(rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    (floor_low, floor_high), (retire_low, retire_high) = thresholds.floor_zone, thresholds.retire_zone
    return ~(((rates >= floor_low) & (rates < floor_high)) | ((rates >= retire_low) & (rates < retire_high)))


def _wrong_matrix(rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """wrong[label, rate]: 1 where that label is not acceptable for that rate (borderline always)."""
    return np.array(
        [
            [label not in acceptable_bands(pass_rate=float(rate), thresholds=thresholds) for rate in rates]
            for label in LABELS
        ],
        dtype=float,
    )


def _wrong_labels(label_mass: np.ndarray, rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """From label probabilities per rate (``propagate``): the probability of a label that is wrong."""
    return (label_mass * _wrong_matrix(rates, thresholds).T).sum(axis=1)


@dataclass(frozen=True)
class Performance:
    """A table's exact behaviour averaged over a population: mean rollouts, error outside the
    zones, and the error in each slice of ``error_slices`` (None where the slice has no mass)."""

    rollouts: float
    error: float
    slices: tuple[float | None, ...]

    @property
    def worst_slice(self) -> float:
        return max((value for value in self.slices if value is not None), default=0.0)


def worst_performance(runs: Sequence[Performance]) -> Performance:
    """The worst of several performances, item by item: most rollouts, most error, each slice's most."""
    slices = tuple(
        None if all(run.slices[index] is None for run in runs) else max(run.slices[index] or 0.0 for run in runs)
        for index in range(len(runs[0].slices))
    )
    return Performance(rollouts=max(run.rollouts for run in runs), error=max(run.error for run in runs), slices=slices)


def table_performance(*, table: StoppingTable, population: Population, thresholds: Thresholds) -> Performance:
    """Exact mean rollouts, error outside the zones and per-slice error of ``table`` on ``population``."""
    rates, weights = np.asarray(population.pass_rates), np.asarray(population.weights)
    label_mass, expected = propagate(schedule=table.attempts, codes=table.labels, pass_rates=rates)
    wrong = _wrong_labels(label_mass, rates, thresholds)
    outside = _outside_zones(rates, thresholds)
    slices = []
    for mask in _slice_masks(rates, thresholds):
        mask = mask & outside
        mass = weights[mask].sum()
        slices.append(float(weights[mask] @ wrong[mask] / mass) if mass > 1e-9 else None)
    outside_mass = weights[outside].sum()
    error = float(weights[outside] @ wrong[outside] / outside_mass) if outside_mass > 0 else 0.0
    return Performance(rollouts=float(weights @ expected), error=error, slices=tuple(slices))


def mixed_performance(first: Performance, second: Performance, share: float) -> Performance:
    """The performance when a ``share`` of tasks (drawn independently of their pass rates) follow
    the table behind ``second`` and the rest the one behind ``first``: rollouts, the error and every
    slice's error are averages over tasks, so each is the same mixture of the two."""
    slices = tuple(
        None if a is None and b is None else (1.0 - share) * (a or 0.0) + share * (b or 0.0)
        for a, b in zip(first.slices, second.slices)
    )
    return Performance(
        rollouts=(1.0 - share) * first.rollouts + share * second.rollouts,
        error=(1.0 - share) * first.error + share * second.error,
        slices=slices,
    )


def _wrong_curve(table: StoppingTable, rates: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """P(a label that is not acceptable) at each of ``rates`` under ``table``, exactly."""
    label_mass, _ = propagate(schedule=table.attempts, codes=table.labels, pass_rates=rates)
    return _wrong_labels(label_mass, rates, thresholds)


def _harm(
    *,
    regions: Sequence[PlausibleRegion],
    tables: Sequence[StoppingTable],
    default_wrongs: Sequence[np.ndarray],
    shares: Sequence[float],
    thresholds: Thresholds,
) -> tuple[float, float] | None:
    """(error, bound) on populations the evidence allows where the environment is wrong outside the
    zones more often than the bound, max(PROMISED_ERROR, the calibrated rule's error there), or None.
    The environment is one pilot or several strata (a ``share`` of its tasks each, with its own
    ``region``, ``table`` and the rule's wrong curve on its rates). Two are tried
    (``most_damaging_together``): the populations where it is wrong most, and where it is wrong
    most beyond the rule."""
    wrongs = [_wrong_curve(table, region.rates, thresholds) for region, table in zip(regions, tables)]
    outsides = [_outside_zones(region.rates, thresholds).astype(float) for region in regions]
    for beyond_rule in (False, True):
        objectives = [
            share * outside * (wrong - (default_wrong if beyond_rule else PROMISED_ERROR))
            for share, outside, wrong, default_wrong in zip(shares, outsides, wrongs, default_wrongs)
        ]
        populations = most_damaging_together(regions, objectives)
        mass = sum(share * float(weights @ outside) for share, weights, outside in zip(shares, populations, outsides))
        if mass <= 0.0:
            continue

        def average(curves: Sequence[np.ndarray], populations: list[np.ndarray] = populations) -> float:
            """``curves`` summed outside the zones over these populations, each weighted by its share."""
            return sum(
                share * float(weights @ (outside * curve))
                for share, weights, outside, curve in zip(shares, populations, outsides, curves)
            )

        error = average(wrongs) / mass
        bound = max(PROMISED_ERROR, average(default_wrongs) / mass)
        if error > bound * (1.0 + 1e-6):
            return error, bound
    return None
