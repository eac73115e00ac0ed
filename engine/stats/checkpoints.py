"""What re-profiling a new checkpoint promises: the operating characteristic behind the item-response prior.

A re-profile (docs/prediction.md) gives a task the band the item-response model predicts when that
band is at least ``level`` probable, with no rollouts, and probes the others under the sampling
policy. Under the model's own assumption (the predicted logit is the true one plus normal noise of
the stated standard deviation), its behaviour at each true pass rate follows exactly from the
policy's own operating characteristic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special
from scipy import stats as scipy_stats

from engine.stats.bands import LABELS, Band, Thresholds, acceptable_bands
from engine.stats.side import ItemResponse
from engine.stats.tables import OperatingCharacteristicCurve

__all__ = ["ability_sd", "predicted_logit_sd", "reprofile_characteristic"]


def ability_sd(
    *, response: ItemResponse, counts: Sequence[tuple[int, int, int, int]], model: int, penalty: float
) -> float:
    """The standard error of ``model``'s fitted ability: the Fisher information of its own
    (task, model, passes, attempts) records under ``response``, plus the ridge ``penalty``."""
    records = np.asarray(list(counts), dtype=float).reshape(-1, 4)
    own = records[records[:, 1] == model]
    probability = special.expit(response.ability[model] - response.difficulty[own[:, 0].astype(int)])
    return float(np.sqrt(1.0 / (penalty + np.sum(own[:, 3] * probability * (1 - probability)))))


def predicted_logit_sd(
    *, response: ItemResponse, counts: Sequence[tuple[int, int, int, int]], ability_sd: float, penalty: float
) -> np.ndarray:
    """Per task: the standard deviation of its predicted logit under a new checkpoint, as
    stats.checkpoint_bands uses it (the difficulty's Fisher information under ``response`` plus the
    ridge ``penalty``, and the new checkpoint's ability's ``ability_sd``)."""
    tasks = response.difficulty.size
    information = np.full(tasks, penalty)
    records = np.asarray(list(counts), dtype=float).reshape(-1, 4)
    if records.size:
        task, model, _, attempts = records.T
        probability = special.expit(response.ability[model.astype(int)] - response.difficulty[task.astype(int)])
        information += np.bincount(task.astype(int), attempts * probability * (1 - probability), tasks)
    return np.sqrt(1.0 / information + ability_sd**2)


def reprofile_characteristic(
    *, curve: OperatingCharacteristicCurve, thresholds: Thresholds, sd: float, level: float = 0.95, points: int = 801
) -> OperatingCharacteristicCurve:
    """The policy of ``curve`` behind the re-profile's prediction, at the same pass rates.

    A task with true logit L is predicted at m ~ N(L, sd²); it keeps band B with no rollouts when
    the model's P(B | m) reaches ``level``, else it is probed and ends as ``curve`` says. Labels,
    ``wrong`` (the zones accept either neighbouring band) and mean rollouts per true pass rate. It
    is the item-response model's promise: it holds as far as that model fits.
    """
    if sd <= 0:
        raise ValueError(f"sd must be positive; got {sd}")
    rates = np.asarray(curve.pass_rates, dtype=float)
    logits = special.logit(np.clip(rates, 1e-6, 1 - 1e-6))
    noise = np.linspace(-8.0, 8.0, points)
    weights = scipy_stats.norm.pdf(noise)
    weights /= weights.sum()
    predicted = logits[:, None] + sd * noise[None, :]
    low = scipy_stats.norm.cdf((special.logit(thresholds.floor) - predicted) / sd)
    high = scipy_stats.norm.sf((special.logit(thresholds.retire_at) - predicted) / sd)
    kept = {
        Band.TOO_HARD: (low >= level) @ weights,
        Band.IN_BAND: ((1.0 - low - high) >= level) @ weights,
        Band.RETIRE: (high >= level) @ weights,
    }
    probed = np.clip(1.0 - sum(kept.values()), 0.0, 1.0)
    labels = {
        str(label): kept.get(label, 0.0) + probed * np.asarray(curve.label_probabilities[str(label)])
        for label in LABELS
    }
    right = np.array(
        [
            sum(labels[str(band)][index] for band in acceptable_bands(pass_rate=float(rate), thresholds=thresholds))
            for index, rate in enumerate(rates)
        ]
    )
    return OperatingCharacteristicCurve(
        pass_rates=rates.tolist(),
        label_probabilities={label: np.asarray(mass).tolist() for label, mass in labels.items()},
        wrong=np.clip(1.0 - right, 0.0, 1.0).tolist(),
        expected_attempts=(probed * np.asarray(curve.expected_attempts)).tolist(),
    )
