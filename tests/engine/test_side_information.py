"""Side information (engine.stats.side): the item-response model, and tables per stratum of score
that stay safe when the score is wrong."""

import numpy as np
import pytest
from scipy import special

from engine import stats

THRESHOLDS = stats.Thresholds()
DEFAULT = stats.SamplingPolicy()


def test_item_response_recovers_difficulty_and_ability():
    rng = np.random.default_rng(0)
    difficulty = rng.normal(0.0, 2.0, 150)
    ability = [0.0, 1.5, 3.0]  # a ladder: three models or checkpoints
    counts = [
        (task, model, int(rng.binomial(24, special.expit(ability[model] - difficulty[task]))), 24)
        for task in range(150)
        for model in range(3)
    ]
    fitted = stats.fit_item_response(counts=counts, tasks=150, models=3)
    assert np.corrcoef(fitted.difficulty, difficulty)[0, 1] > 0.95
    assert fitted.ability[0] == 0.0 and 1.0 < fitted.ability[1] < 2.0 and 2.4 < fitted.ability[2] < 3.6
    # a task the strong model never probed is predicted from the cheap model's results alone
    unseen = stats.fit_item_response(counts=[c for c in counts if not (c[0] == 0 and c[1] == 2)], tasks=150, models=3)
    assert abs(unseen.predicted_logit(0, 2) - (ability[2] - difficulty[0])) < 1.0


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="out of range"):
        stats.fit_item_response(counts=[(3, 0, 1, 2)], tasks=2, models=1)
    with pytest.raises(ValueError, match="passes"):
        stats.fit_item_response(counts=[(0, 0, 3, 2)], tasks=1, models=1)


def probe(rates, rng):
    table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    evidence = []
    for rate in rates:
        outcomes = np.cumsum(rng.random(table.attempts[-1]) < rate)
        for attempts, codes in zip(table.attempts, table.labels):
            if codes[int(outcomes[attempts - 1])] != stats.CONTINUE:
                evidence.append((int(outcomes[attempts - 1]), attempts))
                break
    return evidence


@pytest.mark.parametrize("adversary", ["random", "shoulder hidden among zeros"])
def test_an_adversarially_wrong_score_keeps_one_percent(adversary):
    """Scores that say nothing, or that file every 4-10% task with the tasks that never pass (the
    earlier prior's failure), cannot push tasks past 1% wrong: each stratum learns from its own
    tasks' evidence, never from the score."""
    rng = np.random.default_rng(4)
    size = 1200
    kind = rng.choice(3, size=size, p=[0.4, 0.3, 0.3])
    rates = np.where(kind == 0, 0.0, np.where(kind == 1, rng.uniform(0.0, 0.10, size), rng.uniform(0.10, 1.0, size)))
    truth = special.logit(np.clip(rates, 1e-4, 1 - 1e-4))
    scores = (
        rng.permutation(truth)
        if adversary == "random"
        else np.where((rates >= 0.04) & (rates < 0.10), -9.2 + rng.normal(0.0, 0.01, size), truth)
    )
    evidence = probe(rates, rng)
    stratified = stats.stratified_tables(
        evidence=evidence, scores=scores, thresholds=THRESHOLDS, policy=DEFAULT, min_tasks_per_stratum=500
    )
    assert len(stratified.tables) == 2
    test_rates = np.concatenate([[0.0] * 40, np.linspace(0.001, 0.1, 30), np.linspace(0.1, 1.0, 30)])
    test_scores = (
        rng.permutation(special.logit(np.clip(test_rates, 1e-4, 1 - 1e-4)))
        if adversary == "random"
        else np.where(
            (test_rates >= 0.04) & (test_rates < 0.10), -9.2, special.logit(np.clip(test_rates, 1e-4, 1 - 1e-4))
        )
    )
    outside = ~(((test_rates >= 0.01) & (test_rates < 0.04)) | ((test_rates >= 0.6) & (test_rates < 0.8)))
    wrong = []
    for rate, score in zip(test_rates[outside], test_scores[outside]):
        curve = stats.operating_characteristic_curve(
            thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=[rate], table=stratified.table_for(score).table
        )
        wrong.append(curve.wrong[0])
    default = stats.operating_characteristic_curve(
        thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=test_rates[outside].tolist()
    )
    assert np.mean(wrong) <= max(0.01, float(np.mean(default.wrong)))


def test_one_score_per_task():
    with pytest.raises(ValueError, match="one score per task"):
        stats.stratified_tables(evidence=[(0, 8)], scores=[], thresholds=THRESHOLDS, policy=DEFAULT)


def test_an_informative_score_learns_per_stratum_and_the_check_keeps_the_rule_on_a_uniform_population():
    """Strata of an informative score each learn a table under the fitted strata (``checked=False``), and the
    check against the populations the strata's evidence allows then keeps the rule on this uniform population,
    as it does for the table learned without a score. What the strata save: bench/calibration/savings.py."""
    rng = np.random.default_rng(5)
    rates = rng.uniform(0.0, 1.0, 1200)
    scores = special.logit(np.clip(rates, 1e-4, 1 - 1e-4)) + rng.normal(0.0, 0.5, rates.size)
    evidence = probe(rates, rng)
    common = {"evidence": evidence, "scores": scores, "thresholds": THRESHOLDS, "policy": DEFAULT}
    # Two strata of 600 tasks each learn their own table; more strata only repeat the search per stratum.
    informed = stats.stratified_tables(strata=2, min_tasks_per_stratum=600, checked=False, **common)
    assert len(informed.tables) == 2 and all(table.learned for table in informed.tables)
    checked = stats.stratified_tables(strata=2, min_tasks_per_stratum=600, **common)
    assert not any(table.learned for table in checked.tables)
    assert "on populations the strata's evidence allows" in checked.tables[0].reason


def test_a_new_checkpoint_reprofiles_only_the_tasks_whose_band_is_uncertain():
    """Two checkpoints probed every task; the third's ability is known: tasks far from the
    thresholds keep their predicted band, those near a threshold are sent to be probed, and the
    predicted bands of the kept ones are right."""
    rng = np.random.default_rng(7)
    difficulty = rng.normal(0.0, 2.5, 300)
    abilities = [-1.0, 0.0, 1.0]
    counts = [
        (task, model, int(rng.binomial(64, special.expit(abilities[model] - difficulty[task]))), 64)
        for task in range(300)
        for model in range(2)
    ]
    fitted = stats.fit_item_response(counts=counts, tasks=300, models=2)
    shift = abilities[0]  # the fit centres the first checkpoint's ability on 0
    bands = stats.checkpoint_bands(
        response=fitted, counts=counts, ability=abilities[2] - shift, ability_sd=0.1, thresholds=THRESHOLDS
    )
    truth = [
        stats.band_for_rate(pass_rate=float(special.expit(abilities[2] - d)), thresholds=THRESHOLDS) for d in difficulty
    ]
    kept = [band for band in bands if not band.uncertain]
    assert 0.3 * len(bands) < len(kept) < len(bands)  # some saved, some re-probed
    wrong = sum(band.band != truth[band.task] for band in kept)
    assert wrong <= 0.05 * len(kept)
    near_floor = [band for band in bands if abs(difficulty[band.task] - (abilities[2] - special.logit(0.02))) < 0.2]
    assert near_floor and all(band.uncertain for band in near_floor)
