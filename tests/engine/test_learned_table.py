"""The stopping table learned from an environment's own probes (engine.stats.learned): safe on every
population, adversarial ones included, and no change for small environments."""

import numpy as np
import pytest

from engine import stats

THRESHOLDS = stats.Thresholds()
DEFAULT = stats.SamplingPolicy()
RATES = np.unique(np.concatenate([[0.0], np.linspace(0.0005, 0.12, 160), np.linspace(0.12, 1.0, 89)]))
OUTSIDE = ~(((RATES >= 0.01) & (RATES < 0.04)) | ((RATES >= 0.60) & (RATES < 0.80)))

# (share, pass rates drawn uniformly in [low, high); low == high is a point mass)
RANDOM_POPULATIONS = 2  # 97 of them: bench/calibration/learned.py --random 100
POPULATIONS = {
    "spike at 0 + near the floor": [(0.4, 0.0, 0.0), (0.3, 0.0, 0.10), (0.3, 0.10, 1.0)],
    "bimodal-like": [(0.5, 0.0, 0.08), (0.5, 0.55, 1.0)],
    "uniform": [(1.0, 0.0, 1.0)],
    # Adversarial: mass piled against the top edge of the floor zone, where a fit that misses the
    # shoulder calls true 4-10% tasks too_hard (the earlier empirical-Bayes prior's failure).
    "piled just above the floor zone": [(0.6, 0.0, 0.0), (0.4, 0.04, 0.05)],
    "zone and just above it": [(0.5, 0.02, 0.04), (0.5, 0.04, 0.06)],
    "piled just under the retire zone": [(0.5, 0.0, 0.0), (0.5, 0.55, 0.60)],
}


def sample(parts, size, rng):
    shares = np.array([share for share, _, _ in parts])
    which = rng.choice(len(parts), size=size, p=shares / shares.sum())
    return np.array(
        [parts[i][1] if parts[i][1] == parts[i][2] else rng.uniform(parts[i][1], parts[i][2]) for i in which]
    )


def weights_on_grid(parts):
    weights = np.zeros(RATES.size)
    for share, low, high in parts:
        if low == high:
            weights[np.argmin(np.abs(RATES - low))] += share
        else:
            # each grid point stands for the cell around it: uniform mass goes by the cells' widths,
            # since RATES is denser below 12%
            inside = (RATES >= low) & (RATES < high)
            widths = np.gradient(RATES)[inside]
            weights[inside] += share * widths / widths.sum()
    return weights


def probe(rates, table, rng):
    """Run tasks through a stopping table; (passes, attempts) where each stopped."""
    evidence = []
    for rate in rates:
        outcomes = np.cumsum(rng.random(table.attempts[-1]) < rate)
        for attempts, codes in zip(table.attempts, table.labels):
            passes = int(outcomes[attempts - 1])
            if codes[passes] != stats.CONTINUE:
                evidence.append((passes, attempts))
                break
    return evidence


def error_outside_zones(table, weights):
    curve = stats.operating_characteristic_curve(thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=RATES, table=table)
    wrong = np.array(curve.wrong)
    return float(weights[OUTSIDE] @ wrong[OUTSIDE] / weights[OUTSIDE].sum()), float(
        weights @ np.array(curve.expected_attempts)
    )


def learn(parts, seed, tasks=1000, checked=True):
    rng = np.random.default_rng(seed)
    evidence = probe(sample(parts, tasks, rng), stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), rng)
    return learn_from(evidence, seed, checked=checked)


def learn_from(evidence, seed, checked=True):
    """As the service learns (``checked``: used only if it harms no population the evidence allows)."""
    return stats.learned_table_from_evidence(
        evidence=evidence, thresholds=THRESHOLDS, policy=DEFAULT, seed=seed, checked=checked
    )


# A population that learns a table and one piled against each edge; every population of this family, and more,
# in bench/calibration/learned.py (docs/benchmarks-calibration.md, "Learned tables").
REPRESENTATIVE = ["spike at 0 + near the floor", "piled just above the floor zone", "piled just under the retire zone"]


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_the_learned_table_never_pushes_a_population_past_one_percent(name):
    """Learned on the population's own probes: at most 1% wrong outside the zones, or (where the
    default itself is above 1%, on populations piled against an edge) no worse than the default."""
    weights = weights_on_grid(POPULATIONS[name])
    default_error, _ = error_outside_zones(stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), weights)
    learned = learn(POPULATIONS[name], seed=1)
    error, _ = error_outside_zones(learned.table, weights)
    assert error <= max(0.01, default_error), (name, learned.reason, error, default_error)


def random_population(rng):
    """One to three parts with random shares: a point mass (at 0 one time in three, else anywhere)
    or a uniform piece of log-uniform width in [0.5%, 50%] anywhere in [0, 1]."""
    parts = []
    for share in rng.dirichlet(np.ones(int(rng.integers(1, 4)))):
        if rng.random() < 0.3:
            point = 0.0 if rng.random() < 1 / 3 else float(rng.uniform(0.0, 1.0))
            parts.append((float(share), point, point))
        else:
            width = float(np.exp(rng.uniform(np.log(0.005), np.log(0.5))))
            low = float(rng.uniform(0.0, 1.0 - width))
            parts.append((float(share), low, low + width))
    return parts


def test_populations_nobody_tuned_for_are_not_pushed_past_one_percent():
    """Populations drawn at random (the populations a user brings are not the family the method was
    built on): each learned from its own 1,000-task pilot, at most max(1%, the default) wrong
    outside the zones, and some of them learn a table that saves rollouts (the check is not simply
    refusing everything)."""
    default_table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    saved = []
    for seed in range(RANDOM_POPULATIONS):
        parts = random_population(np.random.default_rng(1000 + seed))
        weights = weights_on_grid(parts)
        if weights[OUTSIDE].sum() < 1e-9:
            continue
        default_error, default_rollouts = error_outside_zones(default_table, weights)
        learned = learn(parts, seed=seed)
        error, rollouts = error_outside_zones(learned.table, weights)
        assert error <= max(0.01, default_error), (parts, learned.reason, error, default_error)
        if learned.learned:
            saved.append(default_rollouts - rollouts)
    assert saved and max(saved) > 0, saved


def test_a_population_the_evidence_allows_is_not_pushed_past_the_rule():
    """A fit is one population among many that explain a pilot almost as well. Build one that
    harms the table learned without the check (the population within PLAUSIBLE_NATS of a uniform
    pilot's best fit where that table is most wrong beyond the calibrated rule), draw a new
    environment from it, and learn again from that environment's own pilot: without the check the
    table is wrong more often than max(1%, the rule) there; with it, never."""
    rng = np.random.default_rng(0)
    default = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    evidence = probe(sample(POPULATIONS["uniform"], 1000, rng), default, rng)
    unchecked = learn_from(evidence, 0, checked=False)
    region = stats.plausible_region(evidence=evidence, thresholds=THRESHOLDS)
    assert region is not None
    rates = region.rates

    def wrong_at(table):
        return np.array(
            stats.operating_characteristic_curve(
                thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=rates, table=table
            ).wrong
        )

    outside = ~(((rates >= 0.01) & (rates < 0.04)) | ((rates >= 0.60) & (rates < 0.80)))
    weights = stats.most_damaging(region, outside * (wrong_at(unchecked.table) - wrong_at(default)))
    assert region.log_likelihood(weights) >= region.best_log_likelihood - stats.PLAUSIBLE_NATS - 1e-9
    harmed = stats.Population(tuple(rates.tolist()), tuple(weights.tolist()), 1000)

    def error(table):
        return stats.table_performance(table=table, population=harmed, thresholds=THRESHOLDS).error

    bound = max(0.01, error(default))
    assert error(unchecked.table) > bound  # the population harms the unchecked table ...
    harmed_rng = np.random.default_rng(1)
    again = probe(harmed_rng.choice(rates, size=1000, p=weights / weights.sum()), default, harmed_rng)
    assert error(learn_from(again, 1, checked=False).table) > bound  # ... and one learned from its own pilot
    checked = learn_from(again, 1)
    assert error(checked.table) <= bound, checked.reason


def test_several_pilots_share_one_margin_of_likelihood():
    """``most_damaging_together`` (the strata of one environment): the populations it finds lose at
    most the region's nats in total, not each, and do more damage than the best fits."""
    rng = np.random.default_rng(3)
    table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    regions = [
        stats.plausible_region(evidence=probe(sample(parts, 400, rng), table, rng), thresholds=THRESHOLDS)
        for parts in (POPULATIONS["uniform"], POPULATIONS["spike at 0 + near the floor"])
    ]
    objectives = [np.where((region.rates >= 0.04) & (region.rates < 0.06), 1.0, 0.0) for region in regions]
    together = stats.most_damaging_together(regions, objectives)
    lost = sum(
        region.best_log_likelihood - region.log_likelihood(weights) for region, weights in zip(regions, together)
    )
    assert 0.5 * regions[0].nats < lost <= regions[0].nats + 1e-6
    gained = sum(
        objective @ (weights - region.best) for objective, weights, region in zip(objectives, together, regions)
    )
    assert gained > 0.01
    alone = [stats.most_damaging(region, objective) for region, objective in zip(regions, objectives)]
    assert gained < sum(
        objective @ (weights - region.best) for objective, weights, region in zip(objectives, alone, regions)
    )


def test_a_table_learned_on_one_population_stays_guarded_on_another():
    """A fit that is wrong (learned on a population with no mass above the floor zone, used on one
    piled there) can only do what the guard allows at every pass rate."""
    learned = learn([(0.6, 0.0, 0.0), (0.4, 0.3, 1.0)], seed=2, checked=False)  # the guard alone
    assert learned.learned
    curve = stats.operating_characteristic_curve(
        thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=[0.04, 0.05, 0.07, 0.10, 0.3, 0.5, 0.9], table=learned.table
    )
    wrong = dict(zip(curve.pass_rates, curve.wrong))
    assert wrong[0.04] <= 0.25 and wrong[0.05] <= 0.15 and wrong[0.07] <= 0.05 and wrong[0.10] <= 0.01
    assert wrong[0.3] <= 0.01 and wrong[0.5] <= 0.10 and wrong[0.9] <= 0.01


def test_an_adversarially_wrong_table_is_held_by_the_guard():
    """The worst table there is (always the wrong band at once) guarded: every label it gives must
    be one the guard's claims accept, so its error at each pass rate is bounded."""
    schedule = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT).attempts
    wrong_labels = []
    for attempts in schedule:
        rate = np.arange(attempts + 1) / attempts
        # too_hard for tasks that pass often, retire for those that rarely do
        wrong_labels.append(np.where(rate < 0.3, 2, 0).astype(np.int8))
    guarded = stats.guarded_table(
        table=stats.StoppingTable(attempts=schedule, labels=tuple(wrong_labels)), thresholds=THRESHOLDS, policy=DEFAULT
    )
    curve = stats.operating_characteristic_curve(
        thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=[0.0, 0.005, 0.10, 0.3, 0.5, 0.9], table=guarded
    )
    assert max(curve.wrong) <= 0.25
    assert dict(zip(curve.pass_rates, curve.wrong))[0.0] == 0.0


def test_small_environments_keep_the_calibrated_rule():
    rng = np.random.default_rng(0)
    evidence = probe(
        sample(POPULATIONS["uniform"], 300, rng), stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), rng
    )
    learned = stats.learned_table(
        population=stats.fit_population(evidence=evidence, thresholds=THRESHOLDS), thresholds=THRESHOLDS, policy=DEFAULT
    )
    default = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    assert not learned.learned and "fewer than 1000" in learned.reason
    assert all(np.array_equal(a, b) for a, b in zip(learned.table.labels, default.labels))


def test_fit_recovers_the_shoulder_above_the_floor():
    """The earlier Beta prior lost the 4-10% shoulder under a spike at 0; the nonparametric fit keeps it."""
    rng = np.random.default_rng(3)
    parts = POPULATIONS["spike at 0 + near the floor"]
    evidence = probe(sample(parts, 2000, rng), stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), rng)
    population = stats.fit_population(evidence=evidence, thresholds=THRESHOLDS)
    assert 0.12 <= population.mass_between(0.04, 0.10) <= 0.24  # truth: 0.18
    assert 0.3 <= population.mass_between(0.0, 1e-9) <= 0.45  # truth: 0.40 at exactly 0


def test_bad_evidence_names_the_problem():
    with pytest.raises(ValueError, match="successes"):
        stats.fit_population(evidence=[(3, 2)], thresholds=THRESHOLDS)


def test_assess_follows_the_learned_table_on_its_schedule_and_the_rule_off_it():
    schedule = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT).attempts
    # A table that calls in_band at the first round whatever it sees
    table = stats.StoppingTable(attempts=schedule, labels=tuple(np.full(n + 1, 1, dtype=np.int8) for n in schedule))
    on = stats.assess(successes=4, attempts=8, thresholds=THRESHOLDS, policy=DEFAULT, table=table)
    assert on.band == "in_band" and on.decided and on.next_round == 0
    off = stats.assess(successes=4, attempts=7, thresholds=THRESHOLDS, policy=DEFAULT, table=table)
    assert off.band == "undecided" and off.next_round == 8


def test_a_mixture_of_two_tables_meets_the_targets_under_every_fit_and_costs_less():
    """The staircase of single tables leaves slack at the limits; a share of tasks on a cheaper
    table closes it. The mixture's predicted performance is the share-weighted mix of its two
    tables' exact performances, it meets the targets under the fit and every resample, and it
    spends fewer rollouts than the single table it is mixed with."""
    rng = np.random.default_rng(0)
    parts = POPULATIONS["spike at 0 + near the floor"]
    evidence = probe(sample(parts, 1000, rng), stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), rng)
    population = stats.fit_population(evidence=evidence, thresholds=THRESHOLDS)
    resamples = stats.population_resamples(evidence=evidence, thresholds=THRESHOLDS, seed=0)
    mixed = stats.learned_table(
        population=population, thresholds=THRESHOLDS, policy=DEFAULT, resamples=resamples, mixture=True
    )
    assert mixed.learned and mixed.cheaper is not None and 0.0 < mixed.cheaper_share < 1.0
    runs = []
    for fit in [population, *resamples]:
        alone = stats.table_performance(table=mixed.table, population=fit, thresholds=THRESHOLDS)
        cheap = stats.table_performance(table=mixed.cheaper, population=fit, thresholds=THRESHOLDS)
        assert alone.error <= 0.009 and alone.worst_slice <= 0.045  # the safe table alone meets them
        runs.append(stats.mixed_performance(alone, cheap, mixed.cheaper_share))
    worst = stats.worst_performance(runs)
    assert worst.error <= 0.009 + 1e-9 and worst.worst_slice <= 0.045 + 1e-9
    assert worst.rollouts == pytest.approx(mixed.predicted.rollouts)
    single = stats.learned_table(population=population, thresholds=THRESHOLDS, policy=DEFAULT, resamples=resamples)
    assert mixed.predicted.rollouts < single.predicted.rollouts
    # each table of the mixture is guarded on its own
    curve = stats.operating_characteristic_curve(
        thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=[0.04, 0.10, 0.3, 0.9], table=mixed.cheaper
    )
    assert max(curve.wrong) <= 0.25


def test_the_share_that_follows_the_cheaper_table_is_fixed_per_task_and_spread_evenly():
    keys = np.arange(1, 20001)
    chosen = np.array([stats.follows_cheaper(int(key), 0.3) for key in keys])
    assert 0.29 <= chosen.mean() <= 0.31
    assert 0.29 <= chosen[:2000].mean() <= 0.31  # consecutive ids (a new batch of tasks) too
    assert all(stats.follows_cheaper(int(key), 0.3) == flag for key, flag in zip(keys[:100], chosen[:100]))
    assert not any(stats.follows_cheaper(int(key), 0.0) for key in keys[:1000])
