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
