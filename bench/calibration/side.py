"""Benchmark: rollouts saved by side information (another model's results through an item-response
model), against the calibrated rule, the table learned without side information, and bound B.

    .venv/bin/python bench/calibration/side.py [--tasks 4000] [--seed 0]

Simulated, seeded. For a population of ``simulate.py``, each task's pass rate under a cheaper
model (or an earlier checkpoint) is the probe model's moved by -1 on the logit scale plus per-task
noise of sd ``sigma`` (the model ladder of bench/calibration/ladder.py uses 0.5; a task that never
passes stays at 0). Procedure, as an environment would run it:

1. the cheap model calibrates every task with the default rule;
2. the probe model calibrates the first half with the default rule (the environment's own probes);
3. an item-response model (``stats.fit_item_response``) is fitted on both; each task's score is
   its predicted logit under the probe model from the cheap model's results alone (a task's own
   probe-model results never enter its score, since a new task has none);
4. the first half's evidence and scores give one learned table per quartile of score
   (``stats.stratified_tables``), and the table learned on all of it
   (``stats.learned_table_from_evidence``), both checked against the populations the evidence allows;
5. the second half is banded with each, exactly (operating characteristic at each task's rate).

Correlation: Spearman, between the score and the true pass rate, on the second half. The
adversarial rows replace the score: random, or (worse) the score of a task that never passes for
every task at 4-10%, so that the shoulder above the floor hides among tasks that never pass.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from learned import BOUND_B  # noqa: E402
from simulate import DEFAULT, POPULATIONS, THRESHOLDS, run_tables, sample_population, summarise  # noqa: E402

from engine import stats  # noqa: E402

SHIFT = -1.0  # the cheap model's logit against the probe model's
CASES = [
    ("spike at 0 + near the floor", 0.5, None),
    ("spike at 0 + near the floor", 1.0, None),
    ("spike at 0 + near the floor", 2.0, None),
    ("spike at 0 + near the floor", 0.5, "random"),
    ("spike at 0 + near the floor", 0.5, "shoulder hidden among zeros"),
    ("uniform", 0.5, None),
    ("uniform", 1.0, None),
]


def cheap_rates(rates: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    logits = special.logit(np.clip(rates, 1e-9, 1 - 1e-9)) + SHIFT + rng.normal(0.0, sigma, rates.size)
    return np.where(rates == 0.0, 0.0, special.expit(logits))


def exact(tables_and_rates) -> dict:
    """Mean rollouts, error and slices of tasks banded by their own tables, exactly. Each entry is
    (table, rates) or a LearnedTable and rates: a mixture counts each task on both its tables, by
    the mixture's shares."""
    rates, weights, wrong, rollouts = [], [], [], []
    for table, task_rates in tables_and_rates:
        if task_rates.size == 0:
            continue
        parts = [(table, 1.0)]
        if isinstance(table, stats.LearnedTable):
            share = table.cheaper_share if table.cheaper is not None else 0.0
            parts = [(table.table, 1.0 - share)] + ([(table.cheaper, share)] if share else [])
        for part, share in parts:
            curve = stats.operating_characteristic_curve(
                thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=task_rates, table=part
            )
            rates.append(task_rates)
            weights.append(np.full(task_rates.size, share))
            wrong.append(np.array(curve.wrong))
            rollouts.append(np.array(curve.expected_attempts))
    all_weights = np.concatenate(weights)
    return summarise(
        np.concatenate(rates), all_weights / all_weights.sum(), np.concatenate(wrong), np.concatenate(rollouts)
    )


def case(population: str, sigma: float, adversary: str | None, tasks: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rates = sample_population(POPULATIONS[population], tasks, rng)
    default = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    _, cheap_attempts, cheap_passes = run_tables(default, cheap_rates(rates, sigma, rng), rng)
    half = tasks // 2
    _, attempts, passes = run_tables(default, rates[:half], rng)
    counts = [(task, 0, int(cheap_passes[task]), int(cheap_attempts[task])) for task in range(tasks)]
    counts += [(task, 1, int(passes[task]), int(attempts[task])) for task in range(half)]
    response = stats.fit_item_response(counts=counts, tasks=tasks, models=2)
    # A task's score may not use its own probe-model results (a new task has none): difficulties
    # from the cheap model alone, placed on the probe model's scale by the fitted ability.
    cheap_only = stats.fit_item_response(counts=[record for record in counts if record[1] == 0], tasks=tasks, models=1)
    scores = response.ability[1] - cheap_only.difficulty
    if adversary == "random":
        scores = rng.permutation(scores)
    elif adversary == "shoulder hidden among zeros":
        zero_score = float(np.median(scores[rates == 0.0]))
        scores = np.where((rates >= 0.04) & (rates < 0.10), zero_score + rng.normal(0, 0.01, tasks), scores)
    evidence = list(zip(passes.tolist(), attempts.tolist()))
    stratified = stats.stratified_tables(
        evidence=evidence, scores=scores[:half], thresholds=THRESHOLDS, policy=DEFAULT, seed=seed
    )
    unstratified = stats.learned_table_from_evidence(
        evidence=evidence, thresholds=THRESHOLDS, policy=DEFAULT, seed=seed
    )
    test_rates, test_scores = rates[half:], scores[half:]
    which = np.array([stratified.stratum(score) for score in test_scores])
    return {
        "correlation": float(scipy_stats.spearmanr(test_scores, test_rates).statistic),
        "default": exact([(default, test_rates)]),
        "learned": exact([(unstratified, test_rates)]),
        "side": exact(
            [(stratified.tables[index], test_rates[which == index]) for index in range(len(stratified.tables))]
        ),
        "strata learned": sum(table.learned for table in stratified.tables),
        "strata": len(stratified.tables),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4000, help="tasks per environment; half are the pilot")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    started = time.perf_counter()
    print(f"{arguments.tasks} tasks per environment, seed {arguments.seed}\n")
    print(
        "| population | cheap-model noise (sd, logit) | score | Spearman with truth | default: rollouts, error "
        "| learned, no side information | learned per stratum of score: rollouts, error, worst slice "
        "| against bound B | against learned |"
    )
    print("|---|---:|---|---:|---|---|---|---:|---:|")
    for population, sigma, adversary in CASES:
        result = case(population, sigma, adversary, arguments.tasks, arguments.seed)
        default, learned, side = result["default"], result["learned"], result["side"]
        bound = BOUND_B[population]
        print(
            f"| {population} | {sigma:g} | {adversary or 'item-response prediction'} | {result['correlation']:.2f} "
            f"| {default['rollouts']:.1f}, {default['error']:.2%} | {learned['rollouts']:.1f}, {learned['error']:.2%} "
            f"| {side['rollouts']:.1f}, {side['error']:.2%}, {side['worst'][0]:.1%} in {side['worst'][1]} "
            f"({result['strata learned']}/{result['strata']} strata learned) "
            f"| {side['rollouts'] / bound - 1:+.0%} | {side['rollouts'] / learned['rollouts'] - 1:+.0%} |",
            flush=True,
        )
    print(f"\nRan in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
