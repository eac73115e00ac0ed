"""Benchmark: what a learned stopping table and strata of an informative score save, at the sizes the suite
once asserted it (tests/engine/test_learned_table.py and test_side_information.py keep the safety claims;
the savings are measured here, docs/benchmarks-calibration.md "What the suite no longer asserts").

    .venv/bin/python bench/calibration/savings.py [--pilot 3000] [--seeds 4] [--score-tasks 1200]

1. Learned tables: the spike population ("spike at 0 + near the floor"), one pilot of ``--pilot`` tasks per
   seed 0..``--seeds``-1, learned as the service does (checked against the populations the pilot allows).
   Per seed: whether a table was learned, its exact expected rollouts and error outside the zones on the
   population, against the calibrated rule's.
2. Strata of score: ``--score-tasks`` uniform tasks, a score that is the true logit plus noise of sd 0.5,
   four strata learned without the check against the rule learned on one stratum (blind), both exact at 400
   new tasks: mean rollouts and mean wrong, zones included.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine import stats  # noqa: E402
from tests.engine import test_side_information as side  # noqa: E402
from tests.engine.test_learned_table import (  # noqa: E402
    DEFAULT,
    POPULATIONS,
    THRESHOLDS,
    error_outside_zones,
    learn,
    weights_on_grid,
)

SPIKE = "spike at 0 + near the floor"


def learned_savings(pilot: int, seeds: int) -> None:
    weights = weights_on_grid(POPULATIONS[SPIKE])
    rule_error, rule_rollouts = error_outside_zones(
        stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), weights
    )
    print(
        f"Learned tables, {SPIKE}, pilots of {pilot} tasks; the rule: {rule_rollouts:.1f} rollouts, {rule_error:.2%} wrong\n"
    )
    print("| seed | learned | rollouts | / rule | wrong outside the zones |")
    print("|---:|---|---:|---:|---:|")
    for seed in range(seeds):
        learned = learn(POPULATIONS[SPIKE], seed=seed, tasks=pilot)
        error, rollouts = error_outside_zones(learned.table, weights)
        print(
            f"| {seed} | {'yes' if learned.learned else 'no'} | {rollouts:.1f} | {rollouts / rule_rollouts:.3f} | {error:.2%} |"
        )


def score_savings(tasks: int) -> None:
    rng = np.random.default_rng(5)
    rates = rng.uniform(0.0, 1.0, tasks)
    scores = special.logit(np.clip(rates, 1e-4, 1 - 1e-4)) + rng.normal(0.0, 0.5, rates.size)
    evidence = side.probe(rates, rng)
    common = {"evidence": evidence, "thresholds": THRESHOLDS, "policy": DEFAULT, "checked": False}
    informed = stats.stratified_tables(scores=scores, min_tasks_per_stratum=max(1, tasks // 4), **common)
    blind = stats.stratified_tables(scores=np.zeros(rates.size), strata=1, **common)
    test_rates = np.linspace(0.0005, 0.9995, 400)
    test_scores = special.logit(test_rates) + rng.normal(0.0, 0.5, test_rates.size)

    def exact(tables):
        curves = [
            stats.operating_characteristic_curve(
                thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=[rate], table=tables.table_for(score).table
            )
            for rate, score in zip(test_rates, test_scores)
        ]
        return np.mean([c.expected_attempts[0] for c in curves]), np.mean([c.wrong[0] for c in curves])

    (informed_rollouts, informed_wrong), (blind_rollouts, blind_wrong) = exact(informed), exact(blind)
    learned = sum(table.learned for table in informed.tables)
    print(f"\nStrata of score, {tasks} uniform tasks, score noise sd 0.5, unchecked\n")
    print("| tables | strata learned | rollouts | / blind | wrong (zones included) |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| per stratum of score | {learned}/{len(informed.tables)} | {informed_rollouts:.1f} | {informed_rollouts / blind_rollouts:.3f} | {informed_wrong:.2%} |"
    )
    print(
        f"| one, no score (blind) | {sum(t.learned for t in blind.tables)}/1 | {blind_rollouts:.1f} | 1 | {blind_wrong:.2%} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pilot", type=int, default=3000, help="tasks in each pilot of the learned tables")
    parser.add_argument("--seeds", type=int, default=4, help="pilots drawn")
    parser.add_argument("--score-tasks", type=int, default=1200, help="tasks behind the strata of score")
    arguments = parser.parse_args()
    started = time.perf_counter()
    learned_savings(arguments.pilot, arguments.seeds)
    score_savings(arguments.score_tasks)
    print(f"\nRan in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
