"""What re-profiling a new checkpoint promises: the operating characteristic behind the item-response prior.

A re-profile (docs/prediction.md) gives a task the band the item-response model predicts when that
band is at least ``level`` probable, with no rollouts, and probes the others under the sampling
policy. Under the model's own assumption (the predicted logit is the true one plus normal noise of
the stated standard deviation), its behaviour at each true pass rate follows exactly from the
policy's own operating characteristic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import scipy  # scipy.stats loads on first use: it costs most of a process's start
from scipy import special

from engine.stats.bands import LABELS, Band, Thresholds, acceptable_bands
from engine.stats.side import CheckpointBand, ItemResponse, checkpoint_bands, fit_item_response
from engine.stats.tables import OperatingCharacteristicCurve

__all__ = [
    "CheckpointPrediction",
    "MIN_CHECKED",
    "PredictionCheck",
    "ability_sd",
    "predict_checkpoint",
    "predicted_logit_sd",
    "prediction_check",
    "reprofile_characteristic",
]


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
    *,
    curve: OperatingCharacteristicCurve,
    thresholds: Thresholds,
    sd: float | Sequence[float],
    level: float = 0.95,
    points: int = 801,
) -> OperatingCharacteristicCurve:
    """The policy of ``curve`` behind the re-profile's prediction, at the same pass rates.

    A task with true logit L is predicted at m ~ N(L, sd²); it keeps band B with no rollouts when
    the model's P(B | m) reaches ``level``, else it is probed and ends as ``curve`` says. Labels,
    ``wrong`` (the zones accept either neighbouring band) and mean rollouts per true pass rate. It
    is the item-response model's promise: it holds as far as that model fits.

    ``sd``: one spread, or the spreads of the re-profile's tasks (each prediction has its own);
    given several, the curve is their mixture, a task drawn at random from them.
    """
    spreads = np.atleast_1d(np.asarray(sd, dtype=float))
    if spreads.size == 0 or np.any(spreads <= 0):
        raise ValueError(f"sd must be positive; got {sd}")
    rates = np.asarray(curve.pass_rates, dtype=float)
    logits = special.logit(np.clip(rates, 1e-6, 1 - 1e-6))
    noise = np.linspace(-8.0, 8.0, points)
    weights = scipy.stats.norm.pdf(noise)
    weights /= weights.sum()

    def kept_at(spread: float) -> np.ndarray:
        """P(kept as too_hard, in_band, retire) per true rate, one spread (one row per band)."""
        predicted = logits[:, None] + spread * noise[None, :]
        low = scipy.stats.norm.cdf((special.logit(thresholds.floor) - predicted) / spread)
        high = scipy.stats.norm.sf((special.logit(thresholds.retire_at) - predicted) / spread)
        return np.stack([(sure >= level) @ weights for sure in (low, 1.0 - low - high, high)])

    # One spread at a time (a rate-by-noise grid each), averaged: the mixture over the tasks.
    mixed = np.mean([kept_at(float(spread)) for spread in spreads], axis=0)
    kept = dict(zip((Band.TOO_HARD, Band.IN_BAND, Band.RETIRE), mixed))
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


# The fewest sample tasks prediction_check must compare with their predictions before it may trust the model.
MIN_CHECKED = 10


@dataclass(frozen=True)
class PredictionCheck:
    """The sample's verdict on the item-response model (``prediction_check``).

    ``checked``: sample tasks compared with a prediction made without their own results under the
    new checkpoint; ``worst_z``: the largest |z| among them; ``critical_z``: the family-wise limit;
    ``outliers``: how many passed it; ``sum_z2`` and ``critical_sum_z2``: the sum of z² and its
    chi-square limit (many moderate misses rather than one gross one); ``misfit_sd``: the spread
    the sample shows beyond what the model expects (the upper end of its likelihood interval), to
    widen every prediction by (``checkpoint_bands(misfit_sd=...)``); ``trusted``: whether predicted
    bands may be kept."""

    checked: int
    worst_z: float
    critical_z: float
    outliers: int
    sum_z2: float
    critical_sum_z2: float
    misfit_sd: float
    trusted: bool

    def as_dict(self) -> dict:
        return {
            "checked": self.checked,
            "worst_z": round(self.worst_z, 3),
            "critical_z": round(self.critical_z, 3),
            "outliers": self.outliers,
            "sum_z2": round(self.sum_z2, 2),
            "critical_sum_z2": round(self.critical_sum_z2, 2),
            "misfit_sd": round(self.misfit_sd, 3),
            "trusted": self.trusted,
        }


def prediction_check(
    *,
    counts: Sequence[tuple[int, int, int, int]],
    tasks: int,
    models: int,
    new_model: int,
    penalty: float = 0.1,
    folds: int = 5,
    alpha: float = 0.05,
    min_checked: int = MIN_CHECKED,
) -> PredictionCheck:
    """Test the item-response model on the new checkpoint's own sample before trusting its predictions.

    ``counts``: (task, model, passes, attempts) records, the new checkpoint's (``new_model``) being
    its random sample. The sample is cut into ``folds``; each fold's tasks are predicted from a fit
    without their own new-checkpoint records (the earlier checkpoints' records and the rest of the
    sample), as every task outside the sample is. A task's z is its observed logit (Jeffreys-smoothed,
    with the binomial's variance) minus the prediction, over both spreads. Under the model each z is
    about standard normal. The model is trusted when at least ``min_checked`` tasks were checked,
    none is beyond the Bonferroni limit (a prior grossly wrong for some tasks) and the sum of z² is
    under its chi-square limit (a prior somewhat wrong for many), each at ``alpha``/2. It is a test,
    not a proof: a prior wrong by a little for a few tasks near a band's edge can pass it
    (docs/benchmarks-calibration.md measures how often and what that costs). Short of failing it, a
    sample that misses by more than the model expects widens every prediction by ``misfit_sd``.
    """
    records = np.asarray(list(counts), dtype=float).reshape(-1, 4)
    own = records[records[:, 1] == new_model]
    sample = np.unique(own[:, 0].astype(int))
    folds = max(1, min(folds, sample.size // 2))
    z_scores: list[float] = []
    held_out: list[tuple[float, float, float, float]] = []  # (passes, attempts, predicted logit, its sd)
    for fold in range(folds):
        held = sample[fold::folds]
        if held.size == 0:
            continue
        keep = ~((records[:, 1] == new_model) & np.isin(records[:, 0].astype(int), held))
        train = records[keep]
        if not np.any(train[:, 1] == new_model):
            continue
        train_counts = [(int(task), int(model), int(passes), int(attempts)) for task, model, passes, attempts in train]
        response = fit_item_response(counts=train_counts, tasks=tasks, models=models, penalty=penalty)
        spread = predicted_logit_sd(
            response=response,
            counts=train_counts,
            ability_sd=ability_sd(response=response, counts=train_counts, model=new_model, penalty=penalty),
            penalty=penalty,
        )
        for row in own[np.isin(own[:, 0].astype(int), held)]:
            task, passes, attempts = int(row[0]), row[2], row[3]
            rate = (passes + 0.5) / (attempts + 1.0)
            observed_variance = 1.0 / ((attempts + 1.0) * rate * (1.0 - rate))
            predicted = response.ability[new_model] - response.difficulty[task]
            residual, variance = special.logit(rate) - predicted, spread[task] ** 2 + observed_variance
            z_scores.append(float(residual / np.sqrt(variance)))
            held_out.append((float(passes), float(attempts), float(predicted), float(spread[task])))
    checked = len(z_scores)
    critical = float(scipy.stats.norm.isf(alpha / 2 / (2 * max(checked, 1))))
    worst = float(np.max(np.abs(z_scores))) if z_scores else 0.0
    outliers = int(np.sum(np.abs(z_scores) > critical))
    sum_z2 = float(np.sum(np.square(z_scores)))
    critical_sum = float(scipy.stats.chi2.isf(alpha / 2, max(checked, 1)))
    return PredictionCheck(
        checked=checked,
        worst_z=worst,
        critical_z=critical,
        outliers=outliers,
        sum_z2=sum_z2,
        critical_sum_z2=critical_sum,
        misfit_sd=_misfit_sd(held_out),
        trusted=checked >= min_checked and outliers == 0 and sum_z2 <= critical_sum,
    )


MISFIT_GRID = np.linspace(0.0, 4.0, 81)


def _misfit_sd(held_out: Sequence[tuple[float, float, float, float]]) -> float:
    """The spread τ that the held-out tasks show beyond their predictions', erring wide: the largest τ on a
    grid whose likelihood is within the 90% likelihood-ratio limit of the best (a sample of 50 often
    understates it, and an understated spread is an overconfident prediction). The likelihood is the
    binomial one of their (passes, attempts), each task's logit normal around its prediction with sd
    sqrt(sd² + τ²) (Gauss-Hermite quadrature): a binomial's own logit is squeezed at the extremes, so
    residuals of observed logits would understate the spread."""
    if not held_out:
        return 0.0
    passes, attempts, predicted, spread = (np.asarray(column)[:, None, None] for column in zip(*held_out))
    nodes, node_weights = np.polynomial.hermite_e.hermegauss(40)
    node_weights = node_weights / node_weights.sum()
    sd = np.sqrt(spread**2 + MISFIT_GRID[None, :, None] ** 2)
    rate = np.clip(special.expit(predicted + sd * nodes[None, None, :]), 1e-12, 1 - 1e-12)
    log_binomial = passes * np.log(rate) + (attempts - passes) * np.log1p(-rate)
    log_likelihood = special.logsumexp(log_binomial, b=node_weights[None, None, :], axis=2).sum(axis=0)
    plausible = log_likelihood >= log_likelihood.max() - scipy.stats.chi2.isf(0.10, 1) / 2
    return float(MISFIT_GRID[np.flatnonzero(plausible)[-1]])


@dataclass(frozen=True)
class CheckpointPrediction:
    """What a re-profile keeps (``predict_checkpoint``): the fit, the new checkpoint's ability and its
    standard error, the sample's check, and each task's band (all uncertain when the check fails)."""

    response: ItemResponse
    ability: float
    ability_sd: float
    check: PredictionCheck
    bands: list[CheckpointBand]


def predict_checkpoint(
    *,
    counts: Sequence[tuple[int, int, int, int]],
    tasks: int,
    models: int,
    new_model: int,
    thresholds: Thresholds,
    level: float = 0.95,
    penalty: float = 0.1,
) -> CheckpointPrediction:
    """The re-profile's rule in one place: fit the item-response model on ``counts`` (the earlier
    checkpoints' records and the new one's sample), test it on the sample (``prediction_check``),
    and give each task its band widened by the misfit the sample cannot rule out; a task is
    ``uncertain`` (to be probed) below ``level``, and every task is when the check fails."""
    response = fit_item_response(counts=counts, tasks=tasks, models=models, penalty=penalty)
    ability = float(response.ability[new_model])
    spread = ability_sd(response=response, counts=counts, model=new_model, penalty=penalty)
    check = prediction_check(counts=counts, tasks=tasks, models=models, new_model=new_model, penalty=penalty)
    bands = checkpoint_bands(
        response=response,
        counts=counts,
        ability=ability,
        ability_sd=spread,
        thresholds=thresholds,
        level=level,
        penalty=penalty,
        misfit_sd=check.misfit_sd,
    )
    if not check.trusted:
        bands = [replace(band, uncertain=True) for band in bands]
    return CheckpointPrediction(response=response, ability=ability, ability_sd=spread, check=check, bands=bands)
