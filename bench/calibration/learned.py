"""Benchmark: the stopping table learned from an environment's own probes, against the calibrated rule.

    .venv/bin/python bench/calibration/learned.py [--pilot 1000] [--seeds 3]

For each population of ``simulate.py`` and a few adversarial ones (mass piled against the floor
zone's top edge), ``--seeds`` times: the first ``--pilot`` tasks of an environment are calibrated
with the default rule (what an environment has probed before it can learn anything), the
population is fitted on their (passes, attempts) (``stats.fit_population``), the guarded table is
learned (``stats.learned_table``), and that table's exact operating characteristic is averaged over
the true population (the tasks that come after the pilot). Prints Markdown for
docs/benchmarks-calibration.md. Bound B is the frontier table's (``simulate.py --frontier``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate import (  # noqa: E402
    DEFAULT,
    GRID,
    POPULATIONS,
    THRESHOLDS,
    population_weights,
    run_tables,
    sample_population,
    summarise,
)

from engine import stats  # noqa: E402

# simulate.py --frontier, docs/benchmarks-calibration.md: B, the fewest mean rollouts of any policy
# probing in rounds of 8 with <= 1% error outside the zones and <= 5% in every slice.
BOUND_B = {
    "spike at 0 + near the floor": 43.9,
    "previous bench (35% at 0)": 47.6,
    "bimodal": 56.4,
    "uniform": 20.3,
    "mostly easy": 19.3,
}
ADVERSARIAL = {
    "adversarial: 50% at 0, 50% uniform [4%, 7%)": [(0.5, "zero", 0, 0), (0.5, "uniform", 0.04, 0.07)],
    "adversarial: 60% at 0, 40% uniform [4%, 5%)": [(0.6, "zero", 0, 0), (0.4, "uniform", 0.04, 0.05)],
    "adversarial: 50% uniform [2%, 4%), 50% uniform [4%, 6%)": [
        (0.5, "uniform", 0.02, 0.04),
        (0.5, "uniform", 0.04, 0.06),
    ],
}


TARGETS: dict = {}  # learned_table's error_target, slice_target, mixture when given on the command line


def learned_on(parts, pilot: int, rng: np.random.Generator) -> stats.LearnedTable:
    """Calibrate a pilot with the default rule, fit its population, learn the table."""
    rates = sample_population(parts, pilot, rng)
    _, attempts, passes = run_tables(stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), rates, rng)
    evidence = list(zip(passes.tolist(), attempts.tolist()))
    population = stats.fit_population(evidence=evidence, thresholds=THRESHOLDS)
    resamples = stats.population_resamples(evidence=evidence, thresholds=THRESHOLDS)
    return stats.learned_table(
        population=population, thresholds=THRESHOLDS, policy=DEFAULT, resamples=resamples, **TARGETS
    )


def on_population(table: stats.StoppingTable | stats.LearnedTable, weights: np.ndarray) -> dict:
    """Exact performance on the population; a learned mixture as its share of tasks on each table."""
    parts = [(table, 1.0)]
    if isinstance(table, stats.LearnedTable):
        share = table.cheaper_share if table.cheaper is not None else 0.0
        parts = [(table.table, 1.0 - share)] + ([(table.cheaper, share)] if share else [])
    wrong, rollouts = np.zeros(GRID.size), np.zeros(GRID.size)
    for part, share in parts:
        curve = stats.operating_characteristic_curve(thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=GRID, table=part)
        wrong += share * np.array(curve.wrong)
        rollouts += share * np.array(curve.expected_attempts)
    return summarise(GRID, weights, wrong, rollouts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pilot", type=int, default=1000, help="tasks calibrated before the population is fitted")
    parser.add_argument("--seeds", type=int, default=3, help="pilots drawn per population")
    parser.add_argument("--mixture", action="store_true", help="allow a mixture of two tables")
    parser.add_argument("--error-target", type=float, help="learned_table's error_target (default: its own)")
    parser.add_argument("--slice-target", type=float, help="learned_table's slice_target (default: its own)")
    arguments = parser.parse_args()
    if arguments.mixture:
        TARGETS["mixture"] = True
    if arguments.error_target is not None:
        TARGETS["error_target"] = arguments.error_target
    if arguments.slice_target is not None:
        TARGETS["slice_target"] = arguments.slice_target
    started = time.perf_counter()
    default_table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    print(f"Pilot of {arguments.pilot} tasks, {arguments.seeds} seeds (0..{arguments.seeds - 1})\n")
    print(
        "| population | bound B | default: rollouts | default: error | default: worst slice "
        "| learned: rollouts (mean of seeds) | / B | learned: error (worst seed) | learned: worst slice (worst seed) "
        "| seeds that learned |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---|---:|")
    for name, parts in {**POPULATIONS, **ADVERSARIAL}.items():
        weights = population_weights(parts)
        default = on_population(default_table, weights)
        runs = []
        for seed in range(arguments.seeds):
            learned = learned_on(parts, arguments.pilot, np.random.default_rng(seed))
            runs.append((learned.learned, on_population(learned, weights)))
        rollouts = float(np.mean([run["rollouts"] for _, run in runs]))
        error = max(run["error"] for _, run in runs)
        worst = max(run["worst"] for _, run in runs)
        bound = BOUND_B.get(name)
        print(
            f"| {name} | {'–' if bound is None else f'{bound:.1f}'} | {default['rollouts']:.1f} | {default['error']:.2%} "
            f"| {default['worst'][0]:.1%} in {default['worst'][1]} | {rollouts:.1f} "
            f"| {'–' if bound is None else f'{rollouts / bound:.2f}x'} | {error:.2%} | {worst[0]:.1%} in {worst[1]} "
            f"| {sum(flag for flag, _ in runs)}/{len(runs)} |",
            flush=True,
        )
    print(f"\nRan in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
