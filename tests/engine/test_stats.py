"""Tests for engine.stats against known values, scripted outcome streams and simulations.

The module is pure (no Django), so nothing here needs a database.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as scipy_stats
from scipy.special import expit, logit

from engine.stats import (
    BANDS,
    BORDERLINE,
    IN_BAND,
    JEFFREYS_PRIOR,
    LABELS,
    RETIRE,
    TOO_HARD,
    UNDECIDED,
    Assessment,
    Band,
    Beta,
    Flag,
    LogitShift,
    SamplingPolicy,
    Thresholds,
    assess,
    assess_discounted,
    band_agreement,
    band_for_rate,
    band_probabilities,
    bayes_optimal_table,
    calibrated_levels,
    calibration_verdict,
    check_thresholds,
    clopper_pearson_interval,
    discounted_posterior,
    expected_grpo_signal,
    fit_logit_shift,
    fit_population_prior,
    grpo_signal,
    jeffreys_interval,
    ladder_prior,
    operating_characteristic,
    operating_characteristic_curve,
    posterior,
    posterior_interval,
    spearman_correlation,
    stopping_table,
    wilson_interval,
)

THRESHOLDS = Thresholds()
POSTERIOR = SamplingPolicy(rule="posterior")
ADAPTIVE = SamplingPolicy()


def run_stream(
    passes: Callable[[int], bool],
    *,
    policy: SamplingPolicy = ADAPTIVE,
    thresholds: Thresholds = THRESHOLDS,
    prior: tuple[float, float] = JEFFREYS_PRIOR,
) -> Assessment:
    """Drive assess the way the calibration service does: request next_round rollouts until 0."""
    successes = attempts = 0
    while True:
        assessment = assess(successes=successes, attempts=attempts, thresholds=thresholds, policy=policy, prior=prior)
        if assessment.next_round == 0:
            return assessment
        successes += sum(bool(passes(index)) for index in range(attempts, attempts + assessment.next_round))
        attempts += assessment.next_round


# --- intervals --------------------------------------------------------------------------------


def test_clopper_pearson_zero_of_149_one_sided_upper_bound_is_just_under_two_percent():
    interval = clopper_pearson_interval(successes=0, attempts=149, level=0.95, sided="upper")
    assert interval.low == 0.0
    assert interval.high == pytest.approx(1 - 0.05 ** (1 / 149), rel=1e-9)
    assert interval.high == pytest.approx(0.019905, abs=1e-6)
    assert interval.high < 0.02


def test_clopper_pearson_zero_of_149_two_sided_upper_end_uses_half_the_tail():
    interval = clopper_pearson_interval(successes=0, attempts=149, level=0.95)
    assert interval.high == pytest.approx(1 - 0.025 ** (1 / 149), rel=1e-9)
    assert interval.high == pytest.approx(0.024454, abs=1e-6)


def test_clopper_pearson_textbook_value_and_lower_bound():
    assert clopper_pearson_interval(successes=5, attempts=10) == pytest.approx((0.187086, 0.812914), abs=1e-6)
    lower_only = clopper_pearson_interval(successes=10, attempts=10, sided="lower")
    assert lower_only.low == pytest.approx(0.05 ** (1 / 10), rel=1e-9)
    assert lower_only.high == 1.0
    assert clopper_pearson_interval(successes=0, attempts=0) == (0.0, 1.0)


def test_jeffreys_interval_matches_beta_quantiles():
    interval = jeffreys_interval(successes=3, attempts=20)
    assert interval == pytest.approx(tuple(scipy_stats.beta.ppf([0.025, 0.975], 3.5, 17.5)), rel=1e-9)
    assert interval == pytest.approx((0.044131, 0.348578), abs=1e-6)


def test_jeffreys_interval_ends_at_zero_or_one_on_extreme_counts():
    no_passes = jeffreys_interval(successes=0, attempts=20)
    assert no_passes.low == 0.0
    assert no_passes.high == pytest.approx(scipy_stats.beta.ppf(0.975, 0.5, 20.5), rel=1e-9)
    assert no_passes.high == pytest.approx(0.116639, abs=1e-6)
    upper_only = jeffreys_interval(successes=0, attempts=20, sided="upper")
    assert upper_only.high == pytest.approx(scipy_stats.beta.ppf(0.95, 0.5, 20.5), rel=1e-9)
    all_pass = jeffreys_interval(successes=20, attempts=20)
    assert all_pass.high == 1.0 and all_pass.low == pytest.approx(1 - no_passes.high, rel=1e-9)


def test_wilson_interval_known_values_and_no_collapse_at_zero():
    assert wilson_interval(successes=5, attempts=10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    zero = wilson_interval(successes=0, attempts=10)
    # The normal (Wald) interval would be [0, 0] here.
    assert zero.low == 0.0 and zero.high == pytest.approx(0.277533, abs=1e-6)
    assert wilson_interval(successes=10, attempts=10).low == pytest.approx(1 - zero.high, abs=1e-12)


def test_interval_rejects_unknown_sidedness_and_bad_counts():
    with pytest.raises(ValueError, match="sided"):
        clopper_pearson_interval(successes=1, attempts=10, sided="one")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(successes=11, attempts=10)
    with pytest.raises(ValueError, match="level"):
        jeffreys_interval(successes=1, attempts=10, level=95)


def test_posterior_interval_with_a_prior_uses_the_posterior():
    interval = posterior_interval(successes=4, attempts=10, prior=(2.0, 3.0), level=0.9)
    assert interval == pytest.approx(tuple(scipy_stats.beta.ppf([0.05, 0.95], 6.0, 9.0)), rel=1e-9)


# --- posterior, bands, GRPO signal -------------------------------------------------------------


def test_posterior_adds_counts_to_the_prior():
    assert posterior(successes=3, attempts=10) == Beta(3.5, 7.5)
    assert posterior(successes=3, attempts=10, prior=(1, 1)).mean == pytest.approx(4 / 12)


def test_band_probabilities_of_a_uniform_posterior_are_the_band_widths():
    probabilities = band_probabilities(posterior=(1.0, 1.0), thresholds=THRESHOLDS)
    assert probabilities == pytest.approx((0.02, 0.68, 0.30), abs=1e-12)


def test_band_probabilities_match_the_beta_cdf():
    alpha, beta = 2.5, 60.5
    probabilities = band_probabilities(posterior=(alpha, beta), thresholds=THRESHOLDS)
    expected_too_hard = scipy_stats.beta.cdf(0.02, alpha, beta)
    expected_retire = scipy_stats.beta.sf(0.70, alpha, beta)
    assert probabilities.too_hard == pytest.approx(expected_too_hard, rel=1e-9)
    assert probabilities.retire == pytest.approx(expected_retire, rel=1e-6, abs=1e-300)
    assert sum(probabilities) == pytest.approx(1.0)


def test_band_for_rate_boundaries_are_floor_inclusive_for_in_band_and_retire_at_inclusive():
    assert band_for_rate(pass_rate=0.0, thresholds=THRESHOLDS) == TOO_HARD
    assert band_for_rate(pass_rate=0.0199, thresholds=THRESHOLDS) == TOO_HARD
    assert band_for_rate(pass_rate=0.02, thresholds=THRESHOLDS) == IN_BAND
    assert band_for_rate(pass_rate=0.6999, thresholds=THRESHOLDS) == IN_BAND
    assert band_for_rate(pass_rate=0.70, thresholds=THRESHOLDS) == RETIRE


def test_grpo_signal_known_values():
    assert grpo_signal(pass_rate=0.5, group_size=8) == pytest.approx(1 - 2 / 256)
    assert grpo_signal(pass_rate=0.1, group_size=8) == pytest.approx(1 - 0.1**8 - 0.9**8)
    assert grpo_signal(pass_rate=0.0) == 0.0
    assert grpo_signal(pass_rate=1.0) == 0.0
    with pytest.raises(ValueError, match="group_size"):
        grpo_signal(pass_rate=0.5, group_size=1)


def test_expected_grpo_signal_is_the_posterior_average():
    alpha, beta = 3.5, 5.5
    numeric, _ = integrate.quad(lambda p: (1 - p**8 - (1 - p) ** 8) * scipy_stats.beta.pdf(p, alpha, beta), 0.0, 1.0)
    assert expected_grpo_signal(posterior=(alpha, beta), group_size=8) == pytest.approx(numeric, rel=1e-7)


# --- configuration validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"floor": 0.0}, "floor"),
        ({"floor": 0.8}, "retire_at"),
        ({"retire_at": 1.0}, "retire_at"),
        ({"floor_zone": (0.03, 0.05)}, "floor_zone"),
        ({"retire_zone": (0.72, 0.80)}, "retire_zone"),
        ({"floor_zone": (0.01, 0.65)}, "floor_zone"),
        ({"floor_zone": "wide"}, "floor_zone"),
    ],
)
def test_thresholds_validation_names_the_field(arguments, field):
    with pytest.raises(ValueError, match=field):
        Thresholds(**arguments)


def test_thresholds_with_default_zones_scale_to_the_environment():
    assert Thresholds.with_default_zones(floor=0.02, retire_at=0.70) == Thresholds()
    custom = Thresholds.with_default_zones(floor=0.05, retire_at=0.95)
    assert custom.floor_zone == pytest.approx((0.025, 0.10))
    assert custom.retire_zone == pytest.approx((0.85, 1.0))
    close = Thresholds.with_default_zones(floor=0.30, retire_at=0.40)
    assert close.floor_zone[1] <= close.retire_zone[0]


def test_thresholds_accept_lists_and_stay_hashable():
    thresholds = Thresholds(floor_zone=[0.01, 0.04], retire_zone=[0.6, 0.8])  # type: ignore[arg-type]
    assert thresholds == THRESHOLDS and hash(thresholds) == hash(THRESHOLDS)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"kind": "bandit"}, "kind"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0.4}, "confidence"),
        ({"round_size": 0}, "round_size"),
        ({"cap": 4}, "cap"),
        ({"fixed_n": 0}, "fixed_n"),
    ],
)
def test_sampling_policy_validation_names_the_field(arguments, field):
    with pytest.raises(ValueError, match=field):
        SamplingPolicy(**arguments)


def test_assess_rejects_impossible_evidence_and_priors():
    with pytest.raises(ValueError, match="successes"):
        assess(successes=9, attempts=8, thresholds=THRESHOLDS, policy=ADAPTIVE)
    with pytest.raises(ValueError, match="attempts"):
        assess(successes=0, attempts=-1, thresholds=THRESHOLDS, policy=ADAPTIVE)
    with pytest.raises(ValueError, match="prior"):
        assess(successes=0, attempts=8, thresholds=THRESHOLDS, policy=ADAPTIVE, prior=(0.0, 1.0))


# --- the adaptive stopping rule on scripted streams ---------------------------------------------


def test_no_attempts_is_undecided_and_asks_for_one_round():
    assessment = assess(successes=0, attempts=0, thresholds=THRESHOLDS, policy=ADAPTIVE)
    assert assessment.band == UNDECIDED and not assessment.decided
    assert assessment.next_round == 8
    assert assessment.pass_rate == 0.5 and assessment.observed_rate is None
    assert (assessment.interval_low, assessment.interval_high) == (0.0, 1.0)


def test_all_fail_stream_stops_too_hard_at_72_attempts():
    # The calibrated rule keeps a 4% task's too_hard error within 10% at 0.95: 0.96^64 = 7.3%
    # leaves too little room for the paths with a pass or two, 0.96^72 = 5.3% enough.
    assessment = run_stream(lambda index: False)
    assert (assessment.band, assessment.attempts, assessment.decided) == (TOO_HARD, 72, True)
    assert assessment.band_probabilities.too_hard < 0.95  # decided on the zone, not on p < floor
    assert assessment.interval_low == 0.0 and assessment.observed_rate == 0.0
    assert assess(successes=0, attempts=64, thresholds=THRESHOLDS, policy=ADAPTIVE).band == UNDECIDED


def test_all_fail_stream_needs_more_attempts_at_higher_confidence():
    # 2% at the edge: 0.96^120 = 0.7%, the rest of the 2% goes to paths with passes.
    assessment = run_stream(lambda index: False, policy=SamplingPolicy(confidence=0.99, cap=512))
    assert (assessment.band, assessment.attempts) == (TOO_HARD, 120)


def test_all_pass_stream_stops_retire_after_one_round():
    assessment = run_stream(lambda index: True)
    assert (assessment.band, assessment.attempts) == (RETIRE, 8)
    assert assessment.interval_high == 1.0
    assert run_stream(lambda index: True, policy=SamplingPolicy(confidence=0.995)).attempts <= 16


def test_thirty_percent_stream_decides_in_band_in_the_first_round():
    assessment = run_stream(lambda index: (index * 3) % 10 < 3)
    assert (assessment.band, assessment.attempts, assessment.successes) == (IN_BAND, 8, 3)
    assert assessment.next_round == 0 and assessment.decided
    assert assessment.grpo_signal > 0.8


def test_sixty_five_percent_stream_in_the_retire_zone_is_decided_in_band():
    # Inside the retire zone either band is right; 26 of 40 makes "below 80%" credible enough.
    assessment = run_stream(lambda index: (index * 13) % 20 < 13)
    assert (assessment.band, assessment.attempts) == (IN_BAND, 40)


def test_stream_at_the_floor_hits_a_small_cap_and_is_borderline():
    policy = SamplingPolicy(cap=64)
    # One pass in 64 (1.6%): never sure enough that p < 4%, nor that p >= 1%.
    assessment = run_stream(lambda index: index == 20, policy=policy)
    assert (assessment.band, assessment.attempts, assessment.successes) == (BORDERLINE, 64, 1)
    assert not assessment.decided and assessment.next_round == 0


def test_last_round_is_trimmed_to_the_cap():
    policy = SamplingPolicy(round_size=8, cap=20)
    assessment = assess(successes=0, attempts=16, thresholds=THRESHOLDS, policy=policy)
    assert assessment.band == UNDECIDED and assessment.next_round == 4


def test_band_is_recomputed_when_thresholds_change():
    evidence = {"successes": 15, "attempts": 16, "policy": ADAPTIVE}
    assert assess(thresholds=THRESHOLDS, **evidence).band == RETIRE
    stricter = Thresholds.with_default_zones(floor=0.02, retire_at=0.90)
    assert assess(thresholds=stricter, **evidence).band == IN_BAND


def test_a_prior_alone_never_decides():
    strong_prior = (1.0, 500.0)
    assessment = assess(successes=0, attempts=0, thresholds=THRESHOLDS, policy=ADAPTIVE, prior=strong_prior)
    assert assessment.band == UNDECIDED and assessment.next_round == 8


def test_stopping_table_agrees_with_assess():
    policy = SamplingPolicy(confidence=0.97, cap=64)
    table = stopping_table(thresholds=THRESHOLDS, policy=policy)
    assert table.attempts == (8, 16, 24, 32, 40, 48, 56, 64)
    for attempts, codes in zip(table.attempts, table.labels):
        for successes, code in enumerate(codes):
            band = assess(successes=successes, attempts=attempts, thresholds=THRESHOLDS, policy=policy).band
            assert band == (UNDECIDED if code < 0 else LABELS[code])


def test_operating_characteristic_is_exact_and_matches_simulation():
    policy = SamplingPolicy(cap=128)
    characteristic = operating_characteristic(pass_rate=0.05, thresholds=THRESHOLDS, policy=policy)
    assert sum(characteristic.label_probabilities.values()) == pytest.approx(1.0)
    rng = np.random.default_rng(11)
    runs = [run_stream(lambda index, draws=rng.random(128): draws[index] < 0.05, policy=policy) for _ in range(3000)]
    simulated_in_band = np.mean([run.band == IN_BAND for run in runs])
    simulated_attempts = np.mean([run.attempts for run in runs])
    assert simulated_in_band == pytest.approx(characteristic.label_probabilities[IN_BAND], abs=0.03)
    assert simulated_attempts == pytest.approx(characteristic.expected_attempts, rel=0.05)


def test_labels_far_from_the_thresholds_are_right_with_high_probability():
    policy = SamplingPolicy(confidence=0.99, cap=512)
    for pass_rate in (0.0, 0.002, 0.10, 0.35, 0.50, 0.90, 1.0):
        characteristic = operating_characteristic(pass_rate=pass_rate, thresholds=THRESHOLDS, policy=policy)
        assert characteristic.error(thresholds=THRESHOLDS) < 0.01, pass_rate


# --- fixed policy ------------------------------------------------------------------------------


def test_fixed_policy_with_raw_labels_labels_by_the_raw_pass_rate_after_fixed_n():
    fixed = SamplingPolicy(kind="fixed", fixed_n=16, labels="raw")  # the papers' rule, the benchmark's baseline
    waiting = assess(successes=0, attempts=10, thresholds=THRESHOLDS, policy=fixed)
    assert (waiting.band, waiting.next_round, waiting.decided) == (UNDECIDED, 6, False)
    assert assess(successes=0, attempts=16, thresholds=THRESHOLDS, policy=fixed).band == TOO_HARD
    one_pass = assess(successes=1, attempts=16, thresholds=THRESHOLDS, policy=fixed)
    assert (one_pass.band, one_pass.observed_rate, one_pass.next_round) == (IN_BAND, 1 / 16, 0)
    fixed_ten = SamplingPolicy(kind="fixed", fixed_n=10, labels="raw")
    assert assess(successes=7, attempts=10, thresholds=THRESHOLDS, policy=fixed_ten).band == RETIRE  # 70% retires
    # The stopping rule is not consulted: 16 of 16 after 8 would retire adaptively.
    assert assess(successes=8, attempts=8, thresholds=THRESHOLDS, policy=fixed).band == UNDECIDED


def test_fixed_policy_decides_a_band_only_where_the_interval_rule_does():
    """Four attempts prove nothing: 2/4 straddles the retire line and 0/4 the floor; both stay undecided."""
    four = SamplingPolicy(kind="fixed", fixed_n=4)
    for successes in (0, 2, 3, 4):
        result = assess(successes=successes, attempts=4, thresholds=THRESHOLDS, policy=four)
        assert (result.band, result.decided, result.next_round) == (UNDECIDED, False, 0), successes
    # One pass in four does prove the pass rate above the floor zone and below the retire zone.
    assert assess(successes=1, attempts=4, thresholds=THRESHOLDS, policy=four).band == IN_BAND
    half = assess(successes=2, attempts=4, thresholds=THRESHOLDS, policy=four)
    assert half.interval_low < THRESHOLDS.retire_at < half.interval_high  # [0.12, 0.88]
    # With the evidence the stopping rule needs, a fixed policy decides what the adaptive rule decides.
    many = SamplingPolicy(kind="fixed", fixed_n=64)
    adaptive = SamplingPolicy()  # the same rounds and cap, so the same claim levels
    for successes in (0, 10, 32, 60):
        fixed_band = assess(successes=successes, attempts=64, thresholds=THRESHOLDS, policy=many).band
        adaptive_band = assess(successes=successes, attempts=64, thresholds=THRESHOLDS, policy=adaptive).band
        assert fixed_band == (adaptive_band if adaptive_band in BANDS else UNDECIDED), successes
    assert assess(successes=32, attempts=64, thresholds=THRESHOLDS, policy=many).band == IN_BAND
    with pytest.raises(ValueError, match="SamplingPolicy.labels"):
        SamplingPolicy(kind="fixed", labels="rounded")


def test_fixed_policy_operating_characteristic_counts_undecided_after_n():
    four = SamplingPolicy(kind="fixed", fixed_n=4)
    curve = operating_characteristic(pass_rate=0.5, thresholds=THRESHOLDS, policy=four)
    # Only one pass in four decides (in_band): probability 4 / 16 at p = 0.5; the rest is undecided.
    assert curve.label_probabilities["borderline"] == pytest.approx(0.75) and curve.expected_attempts == 4
    assert curve.label_probabilities["in_band"] == pytest.approx(0.25)
    raw = operating_characteristic(
        pass_rate=0.5, thresholds=THRESHOLDS, policy=SamplingPolicy(kind="fixed", fixed_n=4, labels="raw")
    )
    assert raw.label_probabilities["borderline"] == 0.0 and raw.label_probabilities["in_band"] > 0.6


# --- empirical-Bayes prior ----------------------------------------------------------------------


def test_population_prior_recovers_a_known_beta():
    rng = np.random.default_rng(3)
    pass_rates = rng.beta(1.0, 3.0, 2000)
    successes = rng.binomial(16, pass_rates)
    prior = fit_population_prior(evidence=[(int(count), 16) for count in successes])
    assert prior is not None
    assert prior.alpha == pytest.approx(1.0, rel=0.2) and prior.beta == pytest.approx(3.0, rel=0.2)


def test_population_prior_needs_enough_tasks():
    assert fit_population_prior(evidence=[(1, 8)] * 29) is None
    assert fit_population_prior(evidence=[(1, 8)] * 29 + [(0, 0)] * 10) is None  # unprobed tasks do not count
    assert fit_population_prior(evidence=[(1, 8)] * 15 + [(0, 8)] * 15) is not None


def test_population_prior_is_clamped_so_it_cannot_dominate():
    rng = np.random.default_rng(5)
    homogeneous = rng.binomial(16, 0.3, 500)  # no spread: the unclamped fit would be very strong
    prior = fit_population_prior(evidence=[(int(count), 16) for count in homogeneous])
    assert prior is not None and prior.strength == pytest.approx(8.0)
    assert prior.mean == pytest.approx(0.3, abs=0.03)
    near_zero = [(0, 32)] * 300 + [(1, 32)] * 20
    assert fit_population_prior(evidence=near_zero).alpha >= 0.2


# --- model ladder ------------------------------------------------------------------------------


def population_pass_rates(rng: np.random.Generator, tasks: int) -> np.ndarray:
    segment = rng.random(tasks)
    return np.where(
        segment < 0.35,
        0.0,
        np.where(
            segment < 0.55,
            rng.uniform(0.0, 0.05, tasks),
            np.where(segment < 0.85, rng.uniform(0.05, 0.70, tasks), rng.uniform(0.70, 1.0, tasks)),
        ),
    )


def test_ladder_prior_reduces_rollouts_for_the_strong_model_under_the_posterior_rule():
    # Under the default calibrated rule a prior never decides (next test); the posterior rule,
    # which trusts its prior, is where the ladder saves rollouts.
    rng = np.random.default_rng(7)
    tasks, probed_by_both, cheap_attempts, true_shift = 1500, 200, 64, 1.5
    strong = population_pass_rates(rng, tasks)
    with np.errstate(divide="ignore"):
        cheap = np.where(strong > 0, expit(logit(strong) - true_shift), 0.0)
    cheap_successes = rng.binomial(cheap_attempts, cheap)
    draws = rng.random((tasks, 256))  # the strong model's outcome stream, shared by both priors
    strong_probe = (draws[:probed_by_both, :32] < strong[:probed_by_both, None]).sum(axis=1)
    ladder = fit_logit_shift(
        cheap=[(int(count), cheap_attempts) for count in cheap_successes[:probed_by_both]],
        strong=[(int(count), 32) for count in strong_probe],
    )
    assert ladder is not None and ladder.tasks == probed_by_both
    assert ladder.shift == pytest.approx(true_shift, abs=0.4)

    later = range(probed_by_both, tasks)
    truth = [band_for_rate(pass_rate=strong[task], thresholds=THRESHOLDS) for task in later]
    results = {}
    for name in ("jeffreys", "ladder"):
        runs = []
        for task in later:
            prior = (
                JEFFREYS_PRIOR
                if name == "jeffreys"
                else ladder_prior(successes=int(cheap_successes[task]), attempts=cheap_attempts, ladder=ladder)
            )
            runs.append(
                run_stream(lambda index, task=task: draws[task, index] < strong[task], prior=prior, policy=POSTERIOR)
            )
        attempts = np.mean([run.attempts for run in runs])
        error = np.mean([run.band != band for run, band in zip(runs, truth)])
        results[name] = (attempts, error)
    assert results["ladder"][0] < 0.8 * results["jeffreys"][0]
    assert results["ladder"][1] <= results["jeffreys"][1] + 0.01


def test_a_prior_does_not_change_the_calibrated_rule_s_decisions():
    # A population prior piled up near 0 (shape 0.2, as fitted where many tasks never pass) used to
    # call 0 of 32 too_hard; the calibrated rule reads the evidence through Jeffreys whatever the prior.
    piled_at_zero = (0.2, 0.56)
    for successes, attempts in [(0, 32), (0, 56), (0, 64), (1, 8), (2, 80), (13, 16)]:
        evidence = {"successes": successes, "attempts": attempts, "thresholds": THRESHOLDS, "policy": ADAPTIVE}
        assert assess(prior=piled_at_zero, **evidence).band == assess(**evidence).band
    assert (
        assess(successes=0, attempts=32, thresholds=THRESHOLDS, policy=POSTERIOR, prior=piled_at_zero).band == TOO_HARD
    )


def test_ladder_prior_is_capped_and_never_decides_alone():
    ladder = LogitShift(shift=2.0, spread=0.0, tasks=50)
    prior = ladder_prior(successes=1000, attempts=1000, ladder=ladder)
    assert prior.strength <= 8.0 + 0.2 and min(prior) >= 0.2
    alone = assess(successes=0, attempts=0, thresholds=THRESHOLDS, policy=ADAPTIVE, prior=prior)
    assert alone.band == UNDECIDED
    noisy = ladder_prior(successes=5, attempts=10, ladder=LogitShift(shift=0.0, spread=2.0, tasks=50))
    assert noisy.strength < 2.0  # a ladder that scatters tasks widely says little
    assert noisy.mean == pytest.approx(5.5 / 11, abs=0.05)


def test_fit_logit_shift_needs_enough_tasks_and_matching_lists():
    assert fit_logit_shift(cheap=[(1, 8)] * 5, strong=[(4, 8)] * 5) is None
    with pytest.raises(ValueError, match="same tasks"):
        fit_logit_shift(cheap=[(1, 8)] * 5, strong=[(4, 8)] * 4)


def test_spearman_correlation_known_values():
    # Ranks (1, 2, 3, 4, 5) and (1, 2, 3.5, 5, 3.5): Pearson of ranks = 8 / sqrt(10 * 9.5).
    with_ties = spearman_correlation(first=[1, 2, 3, 4, 5], second=[5, 6, 7, 8, 7])
    assert with_ties == pytest.approx(8 / math.sqrt(95))
    assert spearman_correlation(first=[0.1, 0.2, 0.3], second=[0.9, 0.5, 0.1]) == pytest.approx(-1.0)
    assert spearman_correlation(first=[0.1, 0.1, 0.1], second=[0.2, 0.3, 0.4]) is None


def test_band_agreement_counts_decided_tasks_and_kappa():
    first = [TOO_HARD, TOO_HARD, IN_BAND, IN_BAND, RETIRE, UNDECIDED]
    second = [TOO_HARD, IN_BAND, IN_BAND, IN_BAND, RETIRE, IN_BAND]
    agreement = band_agreement(first=first, second=second)
    assert agreement.tasks == 5
    assert agreement.agreement == pytest.approx(4 / 5)
    # chance = (2*1 + 2*3 + 1*1) / 25 = 9/25
    assert agreement.cohen_kappa == pytest.approx((4 / 5 - 9 / 25) / (1 - 9 / 25))
    assert agreement.counts[(TOO_HARD, IN_BAND)] == 1 and agreement.counts[(UNDECIDED, IN_BAND)] == 1
    assert band_agreement(first=[UNDECIDED], second=[IN_BAND]).agreement is None


# --- drift ---------------------------------------------------------------------------------------


def test_discounted_posterior_weights_older_checkpoints_exponentially():
    history = [(0, 10, 2), (1, 10, 6)]
    assert discounted_posterior(history=history, discount=0.5) == pytest.approx((0.5 + 7.0, 0.5 + 8.0))
    assert discounted_posterior(history=history, discount=1.0) == pytest.approx((8.5, 12.5))
    assert discounted_posterior(history=[(0, 10, 2), (2, 10, 6)], discount=0.5) == pytest.approx(
        (0.5 + 0.5 + 6.0, 0.5 + 2.0 + 4.0)
    )
    with pytest.raises(ValueError, match="discount"):
        discounted_posterior(history=history, discount=0.0)


def test_task_outgrown_by_the_latest_checkpoint_is_retired():
    history = [(0, 64, 13), (1, 64, 32), (2, 64, 58)]  # 20%, 50%, then 91% under the latest
    pooled = assess(successes=103, attempts=192, thresholds=THRESHOLDS, policy=ADAPTIVE)
    assert pooled.band == IN_BAND
    drifted = assess_discounted(history=history, thresholds=THRESHOLDS, policy=ADAPTIVE, discount=0.25)
    assert drifted.band == RETIRE and drifted.decided
    assert drifted.pass_rate > THRESHOLDS.retire_at
    assert (drifted.attempts, drifted.successes) == (192, 103)
    assert drifted.effective_attempts == pytest.approx(64 + 16 + 4)


def test_new_checkpoint_without_rollouts_asks_for_a_round():
    history = [(0, 256, 60), (3, 0, 0)]  # old evidence counts 1/8 after three checkpoints
    assessment = assess_discounted(history=history, thresholds=THRESHOLDS, policy=ADAPTIVE)
    assert assessment.effective_attempts == pytest.approx(32.0)
    assert assessment.band in (UNDECIDED, IN_BAND)
    assert assess_discounted(history=[], thresholds=THRESHOLDS, policy=ADAPTIVE).next_round == 8


# --- issue 13: the calibrated rule keeps its promise per task, exactly ----------------------------


def _error_at(pass_rate: float, policy: SamplingPolicy, thresholds: Thresholds = THRESHOLDS) -> float:
    return operating_characteristic(pass_rate=pass_rate, thresholds=thresholds, policy=policy).error(
        thresholds=thresholds
    )


def test_a_five_percent_task_is_almost_never_called_too_hard_by_the_default():
    characteristic = operating_characteristic(pass_rate=0.05, thresholds=THRESHOLDS, policy=ADAPTIVE)
    assert characteristic.label_probabilities[TOO_HARD] < 0.06
    # The old default with a population prior piled at 0 (what many never-passing tasks fit)
    # called it too_hard far more often: the failure issue 13 measured.
    piled = operating_characteristic(pass_rate=0.05, thresholds=THRESHOLDS, policy=POSTERIOR, prior=(0.2, 0.56))
    assert piled.label_probabilities[TOO_HARD] > 0.2


@pytest.mark.parametrize("confidence", [0.95, 0.99])
def test_calibrated_rule_holds_each_claim_to_its_edge_error(confidence):
    policy = SamplingPolicy(confidence=confidence)
    floor_low, floor_high = THRESHOLDS.floor_zone
    retire_low, retire_high = THRESHOLDS.retire_zone
    table = stopping_table(thresholds=THRESHOLDS, policy=policy)
    edge_errors = policy.edge_errors
    checks = [
        (floor_high, TOO_HARD, edge_errors[0]),
        (np.nextafter(floor_low, 0), IN_BAND, edge_errors[1]),
        (retire_high, IN_BAND, edge_errors[2]),
        (np.nextafter(retire_low, 0), RETIRE, edge_errors[3]),
    ]
    for pass_rate, wrong_band, allowed in checks:
        characteristic = operating_characteristic(
            pass_rate=float(pass_rate), thresholds=THRESHOLDS, policy=policy, table=table
        )
        assert characteristic.label_probabilities[wrong_band] <= allowed + 1e-9
    assert edge_errors == pytest.approx((2 * (1 - confidence),) * 2 + (1 - confidence,) * 2)


def test_calibrated_error_falls_away_from_the_edges_for_other_thresholds():
    thresholds = Thresholds.with_default_zones(floor=0.03, retire_at=0.65)
    for pass_rate in (0.0, 0.002, 0.15, 0.4, 0.95, 1.0):
        assert _error_at(pass_rate, ADAPTIVE, thresholds) < 0.01
    assert _error_at(0.1, ADAPTIVE, thresholds) < 0.02


def test_calibrated_levels_are_tight():
    levels = calibrated_levels(thresholds=THRESHOLDS, policy=ADAPTIVE)
    assert all(0.5 < level < 1 for level in levels)
    # Zero passes decide too_hard exactly where the level is first met: 0 of 64 is not enough.
    zero_of = {n: assess(successes=0, attempts=n, thresholds=THRESHOLDS, policy=ADAPTIVE).band for n in (64, 72)}
    assert zero_of == {64: UNDECIDED, 72: TOO_HARD}


def test_operating_characteristic_curve_matches_the_pointwise_computation():
    curve = operating_characteristic_curve(thresholds=THRESHOLDS, policy=ADAPTIVE, pass_rates=[0.0, 0.03, 0.05, 0.7])
    assert curve.pass_rates == [0.0, 0.03, 0.05, 0.7]
    for index, pass_rate in enumerate(curve.pass_rates):
        single = operating_characteristic(pass_rate=pass_rate, thresholds=THRESHOLDS, policy=ADAPTIVE)
        assert curve.expected_attempts[index] == pytest.approx(single.expected_attempts)
        for label, probability in single.label_probabilities.items():
            assert curve.label_probabilities[label][index] == pytest.approx(probability)
    assert curve.wrong[1] == pytest.approx(
        curve.label_probabilities[BORDERLINE][1] + curve.label_probabilities[RETIRE][1]
    )
    assert curve.wrong[3] == pytest.approx(
        curve.label_probabilities[TOO_HARD][3] + curve.label_probabilities[BORDERLINE][3]
    )
    default = operating_characteristic_curve(thresholds=THRESHOLDS, policy=ADAPTIVE)
    assert default.pass_rates[0] == 0.0 and default.pass_rates[-1] == 1.0 and len(default.pass_rates) > 100


def test_bayes_optimal_table_beats_the_calibrated_rule_on_its_own_population():
    rates = np.concatenate([[0.0], np.linspace(0.001, 0.999, 200)])
    weights = np.concatenate([[0.4], np.full(200, 0.6 / 200)])
    policy = SamplingPolicy(cap=128)
    default_table = stopping_table(thresholds=THRESHOLDS, policy=policy)

    def population_average(table):
        curve = operating_characteristic_curve(thresholds=THRESHOLDS, policy=policy, pass_rates=rates, table=table)
        return float(weights @ np.array(curve.expected_attempts)), float(weights @ np.array(curve.wrong))

    default_rollouts, default_error = population_average(default_table)
    bound = bayes_optimal_table(
        thresholds=THRESHOLDS, policy=policy, pass_rates=rates, weights=weights, rollout_cost=3e-4
    )
    bound_rollouts, bound_error = population_average(bound)
    # Knowing the population, it is at least as good on both counts... for this cost, by a margin.
    assert bound_rollouts <= default_rollouts and bound_error <= default_error
    assert all(code >= 0 for code in bound.labels[-1]) and 3 not in bound.labels[-1]  # never borderline
    with pytest.raises(ValueError, match="weights"):
        bayes_optimal_table(
            thresholds=THRESHOLDS, policy=policy, pass_rates=[0.1], weights=[0.5, 0.5], rollout_cost=1e-3
        )


def test_bayes_optimal_table_spends_more_where_errors_are_priced_higher():
    rates = np.concatenate([[0.0], np.linspace(0.001, 0.999, 200)])
    weights = np.concatenate([[0.4], np.full(200, 0.6 / 200)])
    policy = SamplingPolicy(cap=128)
    near_floor = (rates >= 0.04) & (rates < 0.07)

    def near_floor_error_and_rollouts(error_weights):
        table = bayes_optimal_table(
            thresholds=THRESHOLDS,
            policy=policy,
            pass_rates=rates,
            weights=weights,
            rollout_cost=3e-4,
            error_weights=error_weights,
        )
        curve = operating_characteristic_curve(thresholds=THRESHOLDS, policy=policy, pass_rates=rates, table=table)
        wrong, rollouts = np.array(curve.wrong), np.array(curve.expected_attempts)
        return float(weights[near_floor] @ wrong[near_floor] / weights[near_floor].sum()), float(weights @ rollouts)

    plain_error, plain_rollouts = near_floor_error_and_rollouts(None)
    priced_error, priced_rollouts = near_floor_error_and_rollouts(np.where(near_floor, 20.0, 1.0))
    assert priced_error < plain_error / 2 and priced_rollouts > plain_rollouts
    with pytest.raises(ValueError, match="error_weights"):
        near_floor_error_and_rollouts(np.ones(3))


# --- bands, flags, thresholds and the whole band rule ---------------------------------------------


def test_bands_and_flags_are_the_strings_stored_in_the_database():
    assert [band.value for band in Band] == ["too_hard", "in_band", "retire", "undecided", "borderline"]
    assert Band.TOO_HARD == "too_hard" and TOO_HARD is Band.TOO_HARD
    assert [flag.value for flag in Flag] == [
        "verifier_trouble",
        "zero_variance",
        "strong_model_fails",
        "prompt_too_long",
        "world_failure",
        "tampered",
    ]


@pytest.mark.parametrize(
    ("floor", "retire_at", "field"),
    [
        (0.0, 0.7, "floor"),
        (0.02, 1.0, "retire_at"),
        (0.5, 0.4, "retire_at"),
        (float("nan"), 0.7, "floor"),
        (True, 0.7, "floor"),
    ],
)
def test_check_thresholds_is_the_one_validation(floor, retire_at, field):
    with pytest.raises(ValueError, match=field):
        check_thresholds(floor=floor, retire_at=retire_at)
    with pytest.raises(ValueError, match=field):
        Thresholds(floor=floor, retire_at=retire_at, floor_zone=(0.0, 0.0), retire_zone=(1.0, 1.0))
    check_thresholds(floor=0.02, retire_at=0.7)


def verdict(**overrides):
    arguments = {"successes": 0, "attempts": 72, "thresholds": THRESHOLDS, "policy": ADAPTIVE}
    return calibration_verdict(**{**arguments, **overrides})


def test_verdict_decides_like_assess_and_flags_zero_variance():
    result = verdict()
    assert result.band == TOO_HARD and result.decided and result.flags == (Flag.ZERO_VARIANCE,)
    assert result.pass_rate == 0.0 and result.interval_low == 0.0 and result.grpo_signal is not None
    empty = verdict(attempts=0)
    assert empty.band == UNDECIDED and not empty.decided and empty.interval_low is None and empty.pass_rate is None


def test_verdict_borderline_when_rollouts_with_errors_reach_the_cap():
    policy = SamplingPolicy(cap=64)
    assert verdict(successes=1, attempts=56, policy=policy).band == UNDECIDED
    capped = verdict(successes=1, attempts=56, generation_errors=8, policy=policy)
    assert capped.band == BORDERLINE and not capped.decided
    fixed = verdict(successes=1, attempts=3, policy=SamplingPolicy(kind="fixed", fixed_n=3))
    assert fixed.band == UNDECIDED and not fixed.decided  # 3 attempts decide nothing; never borderline
    raw = verdict(successes=1, attempts=3, policy=SamplingPolicy(kind="fixed", fixed_n=3, labels="raw"))
    assert raw.band == IN_BAND


def test_verdict_verifier_trouble_is_never_called_hard():
    troubled = verdict(verifier_errors=20)  # 20 of 92 verdicts > 20% (18 would be 20%)
    assert troubled.band == UNDECIDED and not troubled.decided and Flag.VERIFIER_TROUBLE in troubled.flags
    assert verdict(verifier_errors=18).band == TOO_HARD  # 18 of 90 = 20% is not more than 20%
    assert verdict(verifier_errors=20, verifier_trouble_share=0.5).band == TOO_HARD
    in_band = verdict(successes=20, attempts=64, verifier_errors=40)
    assert in_band.band == IN_BAND and Flag.VERIFIER_TROUBLE in in_band.flags


def test_verdict_strong_model_fails_needs_a_strong_model_an_audit_and_zero_passes():
    assert Flag.STRONG_MODEL_FAILS in verdict(strong_model=True, audit_passed=True).flags
    assert Flag.STRONG_MODEL_FAILS not in verdict(strong_model=True, audit_passed=False).flags
    assert Flag.STRONG_MODEL_FAILS not in verdict(strong_model=False, audit_passed=True).flags
    assert Flag.STRONG_MODEL_FAILS not in verdict(strong_model=True, audit_passed=True, attempts=64).flags
    with pytest.raises(ValueError, match="verifier_errors"):
        verdict(verifier_errors=-1)
