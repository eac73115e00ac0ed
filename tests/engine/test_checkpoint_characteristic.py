"""The operating characteristic of re-profiling a checkpoint behind the item-response prior."""

import numpy as np
import pytest

from engine import stats

THRESHOLDS = stats.Thresholds.with_default_zones(floor=0.02, retire_at=0.7)
RULE = stats.operating_characteristic_curve(thresholds=THRESHOLDS, policy=stats.SamplingPolicy(kind="adaptive"))


def at(curve, rate, series):
    return series(curve)[curve.pass_rates.index(rate)]


def test_sure_predictions_cost_nothing_and_uncertain_ones_cost_what_the_rule_does():
    prior = stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=0.3)
    rollouts = lambda curve: curve.expected_attempts  # noqa: E731
    # Far from a threshold the prediction is sure: no rollouts, and the right band.
    for rate in (0.0, 0.2, 0.9):
        assert at(prior, rate, rollouts) < 0.5 < at(RULE, rate, rollouts)
        assert at(prior, rate, lambda curve: curve.wrong) <= 0.001
    # At the floor nothing is sure: the rule decides, as without the prior.
    assert at(prior, 0.02, rollouts) == pytest.approx(at(RULE, 0.02, rollouts), rel=0.15)
    assert np.allclose(np.sum([prior.label_probabilities[label] for label in prior.label_probabilities], axis=0), 1.0)


def test_a_vaguer_prior_probes_more_and_a_sharp_one_adds_little_error_anywhere():
    sharp, vague = (stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=sd) for sd in (0.3, 1.2))
    assert sum(vague.expected_attempts) > sum(sharp.expected_attempts)
    assert max(np.subtract(sharp.wrong, RULE.wrong)) <= 0.01
    # The widest a prediction gets (the fit's ridge bounds a difficulty's sd by about 3 logits): the rule's cost.
    widest = stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=3.0)
    middle = RULE.pass_rates.index(0.2)
    assert widest.expected_attempts[middle] == pytest.approx(RULE.expected_attempts[middle], rel=0.05)
    with pytest.raises(ValueError, match="sd"):
        stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=0.0)


def test_the_tasks_spreads_draw_their_mixture_not_the_median():
    """Each prediction has its own uncertainty: given several, the curve is the average of each one's
    curve, and a few vague predictions among sharp ones cost rollouts the median would not show."""
    spreads = [0.3, 0.3, 0.3, 2.0]
    mixture = stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=spreads)
    each = [stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=spread) for spread in spreads]
    assert np.allclose(mixture.expected_attempts, np.mean([curve.expected_attempts for curve in each], axis=0))
    assert np.allclose(mixture.wrong, np.mean([curve.wrong for curve in each], axis=0), atol=1e-12)
    median = stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=float(np.median(spreads)))
    middle = RULE.pass_rates.index(0.2)
    assert mixture.expected_attempts[middle] > median.expected_attempts[middle] + 1.0
    with pytest.raises(ValueError, match="sd"):
        stats.reprofile_characteristic(curve=RULE, thresholds=THRESHOLDS, sd=[0.3, -1.0])


def ladder_counts(new_logit_of, *, tasks=300, sample=50, seed=0):
    """Two earlier checkpoints on a Rasch ladder (24 attempts each, binomial draws), and the new one's
    random sample drawn at `new_logit_of(task logit under checkpoint 1)` (also 24 attempts)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(-1.0, 1.5, tasks)
    counts = [
        (task, model, int(rng.binomial(24, expit(logits[task] + model))), 24)
        for task in range(tasks)
        for model in (0, 1)
    ]
    new = new_logit_of(logits)
    for task in rng.choice(tasks, size=sample, replace=False):
        counts.append((int(task), 2, int(rng.binomial(24, expit(new[task]))), 24))
    return counts


def expit(value):
    return 1.0 / (1.0 + np.exp(-value))


@pytest.mark.parametrize("seed", [0])  # one ladder draw: each draw builds three item-response fits
def test_the_sample_trusts_a_model_that_holds_and_not_one_that_reorders_the_tasks(seed):
    holds = stats.prediction_check(
        counts=ladder_counts(lambda logits: logits + 1.0, seed=seed), tasks=300, models=3, new_model=2
    )
    assert holds.trusted and holds.checked == 50 and holds.misfit_sd < 0.5
    reversed_ = stats.prediction_check(
        counts=ladder_counts(lambda logits: -1.0 - logits, seed=seed), tasks=300, models=3, new_model=2
    )
    assert not reversed_.trusted and reversed_.outliers > 0
    # Noise the model does not know of: the sample sees it, and the predictions are widened by it.
    rng = np.random.default_rng(seed)
    noisy = stats.prediction_check(
        counts=ladder_counts(lambda logits: logits + 1.0 + rng.normal(0.0, 1.5, logits.size), seed=seed),
        tasks=300,
        models=3,
        new_model=2,
    )
    assert noisy.misfit_sd > holds.misfit_sd + 0.5


def test_too_small_a_sample_is_not_trusted():
    small = stats.prediction_check(
        counts=ladder_counts(lambda logits: logits + 2.0, sample=6), tasks=300, models=3, new_model=2
    )
    assert small.checked == 6 and not small.trusted


def test_widening_by_the_misfit_keeps_fewer_bands():
    counts = ladder_counts(lambda logits: logits + 2.0)
    response = stats.fit_item_response(counts=counts, tasks=300, models=3)
    bands = [
        stats.checkpoint_bands(
            response=response,
            counts=counts,
            ability=float(response.ability[2]),
            ability_sd=0.2,
            thresholds=THRESHOLDS,
            misfit_sd=misfit,
        )
        for misfit in (0.0, 1.0)
    ]
    sure = [sum(not band.uncertain for band in each) for each in bands]
    assert sure[0] > sure[1] > 0
