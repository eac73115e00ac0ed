"""Benchmark: rollouts spent and labels got wrong by fixed-N and adaptive calibration.

    .venv/bin/python bench/calibration/simulate.py [--tasks 100000] [--seed 0]

A population of simulated tasks with known true pass rates (35% exactly 0, 20% uniform in
[0, 5%), 30% uniform in [5%, 70%), 15% uniform in [70%, 100%]) is calibrated by every method on
the same outcomes: task t's attempt i passes when u[t, i] < p[t], with u drawn once. Every method
runs the stopping table that ``engine.stats.assess`` itself produces, so the benchmark
measures the code the service runs. Prints a Markdown table (pasted into
docs/benchmarks-calibration.md) and, for each adaptive setting, exact error rates at the edges of
the indifference zones.

Definitions (thresholds: floor 2%, retire_at 70%, zones [1%, 4%) and [60%, 80%)):
* misclassified: final label differs from the true band; ``borderline`` counts as wrong.
* outside zones: the same, among tasks whose true pass rate lies outside both zones.
* useful lost: truly in-band tasks labelled too_hard or retire (thrown away).
* borderline: tasks that reached the cap undecided.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.stats import (  # noqa: E402  (the path is set just above)
    JEFFREYS_PRIOR,
    LABELS,
    Beta,
    SamplingPolicy,
    StoppingTable,
    Thresholds,
    fit_population_prior,
    operating_characteristic,
    stopping_table,
)

THRESHOLDS = Thresholds()
BORDERLINE_CODE = LABELS.index("borderline")
CHUNK_TASKS = 10_000


@dataclass(frozen=True)
class Method:
    name: str
    policy: SamplingPolicy
    population_prior: bool = False  # fit a prior on a pilot calibrated with Jeffreys first


METHODS = [
    Method("fixed N=8", SamplingPolicy(kind="fixed", fixed_n=8)),
    Method("fixed N=16", SamplingPolicy(kind="fixed", fixed_n=16)),
    Method("fixed N=32", SamplingPolicy(kind="fixed", fixed_n=32)),
    Method("fixed N=64", SamplingPolicy(kind="fixed", fixed_n=64)),
    Method("fixed N=150", SamplingPolicy(kind="fixed", fixed_n=150)),
    Method("adaptive, defaults (confidence 0.95, cap 256)", SamplingPolicy()),
    Method("adaptive, confidence 0.97, cap 256", SamplingPolicy(confidence=0.97)),
    Method("adaptive, confidence 0.99, cap 256", SamplingPolicy(confidence=0.99)),
    Method("adaptive, confidence 0.99, cap 512", SamplingPolicy(confidence=0.99, cap=512)),
    Method("adaptive, confidence 0.995, cap 512", SamplingPolicy(confidence=0.995, cap=512)),
    Method(
        "adaptive + population prior, confidence 0.98, cap 256",
        SamplingPolicy(confidence=0.98),
        population_prior=True,
    ),
    Method(
        "adaptive + population prior, confidence 0.995, cap 512",
        SamplingPolicy(confidence=0.995, cap=512),
        population_prior=True,
    ),
]


def true_pass_rates(*, tasks: int, rng: np.random.Generator) -> np.ndarray:
    """The population, with exact shares per segment, in random order."""
    shares = [0.35, 0.20, 0.30, 0.15]
    counts = [int(round(share * tasks)) for share in shares[:-1]]
    counts.append(tasks - sum(counts))
    pass_rates = np.concatenate(
        [
            np.zeros(counts[0]),
            rng.uniform(0.0, 0.05, counts[1]),
            rng.uniform(0.05, 0.70, counts[2]),
            rng.uniform(0.70, 1.00, counts[3]),
        ]
    )
    return rng.permutation(pass_rates)


def cumulative_passes(*, pass_rates: np.ndarray, max_attempts: int, rng: np.random.Generator) -> np.ndarray:
    """passes[t, n]: passes among task t's first n attempts (column 0 is zero)."""
    uniforms = rng.random((pass_rates.size, max_attempts), dtype=np.float32)
    outcomes = uniforms < pass_rates.astype(np.float32)[:, None]
    passes = np.zeros((pass_rates.size, max_attempts + 1), dtype=np.int16)
    np.cumsum(outcomes, axis=1, dtype=np.int16, out=passes[:, 1:])
    return passes


def run_table(table: StoppingTable, passes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels (codes), attempts spent and passes at the stop, for each task."""
    tasks = passes.shape[0]
    labels = np.full(tasks, -1, dtype=np.int8)
    attempts = np.zeros(tasks, dtype=np.int32)
    successes = np.zeros(tasks, dtype=np.int32)
    sampling = np.ones(tasks, dtype=bool)
    for round_attempts, codes in zip(table.attempts, table.labels):
        round_passes = passes[sampling, round_attempts]
        round_codes = codes[round_passes]
        stopped = round_codes >= 0
        rows = np.flatnonzero(sampling)[stopped]
        labels[rows] = round_codes[stopped]
        attempts[rows] = round_attempts
        successes[rows] = round_passes[stopped]
        sampling[rows] = False
        if not sampling.any():
            break
    return labels, attempts, successes


def true_band_codes(pass_rates: np.ndarray) -> np.ndarray:
    return np.where(pass_rates < THRESHOLDS.floor, 0, np.where(pass_rates < THRESHOLDS.retire_at, 1, 2))


def outside_zones(pass_rates: np.ndarray) -> np.ndarray:
    (floor_low, floor_high), (retire_low, retire_high) = THRESHOLDS.floor_zone, THRESHOLDS.retire_zone
    in_floor_zone = (pass_rates >= floor_low) & (pass_rates < floor_high)
    in_retire_zone = (pass_rates >= retire_low) & (pass_rates < retire_high)
    return ~(in_floor_zone | in_retire_zone)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pilot", type=int, default=2_000, help="tasks calibrated with Jeffreys to fit the population prior"
    )
    arguments = parser.parse_args()
    started = time.perf_counter()

    seeds = np.random.SeedSequence(arguments.seed)
    population_seed, *chunk_seeds = seeds.spawn(1 + -(-arguments.tasks // CHUNK_TASKS))
    pass_rates = true_pass_rates(tasks=arguments.tasks, rng=np.random.default_rng(population_seed))
    max_attempts = max(
        method.policy.cap if method.policy.kind == "adaptive" else method.policy.fixed_n for method in METHODS
    )
    pilot = min(arguments.pilot, arguments.tasks, CHUNK_TASKS)

    jeffreys_tables = {
        method.name: stopping_table(thresholds=THRESHOLDS, policy=method.policy, prior=JEFFREYS_PRIOR)
        for method in METHODS
    }
    # Population prior: calibrate the pilot tasks with Jeffreys, fit on their evidence, use it
    # for every later task. The pilot's rollouts and labels count like any other task's.
    fitted_priors: dict[str, Beta] = {}
    first_chunk_passes = cumulative_passes(
        pass_rates=pass_rates[:CHUNK_TASKS],
        max_attempts=max_attempts,
        rng=np.random.default_rng(chunk_seeds[0]),
    )
    for method in METHODS:
        if method.population_prior:
            _, attempts, successes = run_table(jeffreys_tables[method.name], first_chunk_passes[:pilot])
            fitted = fit_population_prior(evidence=list(zip(successes.tolist(), attempts.tolist())))
            fitted_priors[method.name] = fitted if fitted is not None else JEFFREYS_PRIOR
    fitted_tables = {
        name: stopping_table(thresholds=THRESHOLDS, policy=method.policy, prior=fitted_priors[name])
        for name, method in ((m.name, m) for m in METHODS)
        if name in fitted_priors
    }

    labels = {method.name: np.empty(arguments.tasks, dtype=np.int8) for method in METHODS}
    spent = {method.name: np.empty(arguments.tasks, dtype=np.int32) for method in METHODS}
    for chunk_index, chunk_start in enumerate(range(0, arguments.tasks, CHUNK_TASKS)):
        chunk = slice(chunk_start, min(chunk_start + CHUNK_TASKS, arguments.tasks))
        passes = (
            first_chunk_passes
            if chunk_index == 0
            else cumulative_passes(
                pass_rates=pass_rates[chunk],
                max_attempts=max_attempts,
                rng=np.random.default_rng(chunk_seeds[chunk_index]),
            )
        )
        for method in METHODS:
            chunk_labels, chunk_attempts, _ = run_table(jeffreys_tables[method.name], passes)
            if method.name in fitted_tables:
                later = slice(pilot if chunk_index == 0 else 0, None)
                fitted_run = run_table(fitted_tables[method.name], passes[later])
                chunk_labels[later], chunk_attempts[later] = fitted_run[0], fitted_run[1]
            labels[method.name][chunk] = chunk_labels
            spent[method.name][chunk] = chunk_attempts

    truth = true_band_codes(pass_rates)
    outside = outside_zones(pass_rates)
    useful = truth == 1
    print(f"Tasks: {arguments.tasks:,}, seed {arguments.seed}; thresholds {THRESHOLDS}")
    print(f"Tasks outside the zones: {outside.mean():.1%}; truly in band: {useful.mean():.1%}\n")
    print("| method | mean rollouts | misclassified | outside zones | useful lost | borderline |")
    print("|---|---:|---:|---:|---:|---:|")
    for method in METHODS:
        method_labels = labels[method.name]
        wrong = method_labels != truth
        lost = useful & (method_labels != 1) & (method_labels != BORDERLINE_CODE)
        print(
            f"| {method.name} | {spent[method.name].mean():.1f} | {wrong.mean():.2%} "
            f"| {wrong[outside].mean():.2%} "
            f"| {lost.sum() / useful.sum():.2%} | {(method_labels == BORDERLINE_CODE).mean():.2%} |"
        )
    for name, prior in fitted_priors.items():
        print(
            f"\nPopulation prior for '{name}' (fitted on {pilot:,} pilot tasks): "
            f"Beta({prior.alpha:.3f}, {prior.beta:.3f})"
        )

    # Exact error for single true pass rates just outside each zone: the worst cases, since the
    # posterior guarantee is an average over the population and the rule looks after every round.
    edges = [0.0099, 0.04, 0.599, 0.80]
    print("\nExact error (and mean rollouts) at the edges of the zones, from operating_characteristic:\n")
    print("| method | " + " | ".join(f"p = {edge:g}" for edge in edges) + " | rollouts at p = 0 |")
    print("|---|" + "---:|" * (len(edges) + 1))
    for method in METHODS:
        if method.policy.kind != "adaptive":
            continue
        prior = fitted_priors.get(method.name, JEFFREYS_PRIOR)
        table = fitted_tables.get(method.name, jeffreys_tables[method.name])
        cells = []
        for edge in edges:
            characteristic = operating_characteristic(
                pass_rate=edge, thresholds=THRESHOLDS, policy=method.policy, prior=prior, table=table
            )
            error = characteristic.error(thresholds=THRESHOLDS)
            cells.append(f"{error:.1%} ({characteristic.expected_attempts:.0f})")
        at_zero = operating_characteristic(
            pass_rate=0.0, thresholds=THRESHOLDS, policy=method.policy, prior=prior, table=table
        )
        print(f"| {method.name} | " + " | ".join(cells) + f" | {at_zero.expected_attempts:.0f} |")
    print(f"\nRan in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
