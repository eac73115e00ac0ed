"""Benchmark: rollouts saved by re-profiling a new checkpoint (predict the sure bands, probe the
uncertain tasks), against probing every task again with the default rule.

    .venv/bin/python bench/calibration/checkpoints.py [--tasks 2000] [--seed 0] [--sample 50]

Simulated, seeded, on the populations of ``simulate.py`` taken as checkpoint 1. A run's policy
improves by ``STEP`` logits per checkpoint; each task's logit under checkpoint k is its logit under
checkpoint 1 plus k·STEP plus per-(task, checkpoint) noise of sd ``misfit`` (0: the Rasch model
holds exactly; 0.5: it does not). A task that never passes at checkpoint 1 starts at logit -8, so it
may start passing later. Procedure, as calibration.services.checkpoints runs it:

1. checkpoints 1 and 2 are calibrated in full with the default rule;
2. checkpoint 3 probes a random sample of ``--sample`` tasks with the default rule;
3. the item-response model is fitted on all of that; ``stats.checkpoint_bands`` gives each other
   task a band and its probability; those below 0.95 are probed with the default rule, the others
   keep the predicted band;
4. against: checkpoint 3 probing every task with the default rule.

Wrong: a label outside the band the truth allows (the zones accept either neighbour), among
tasks outside the zones, as in simulate.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate import DEFAULT, POPULATIONS, THRESHOLDS, outside_zones, run_tables, sample_population  # noqa: E402

from engine import stats  # noqa: E402

STEP = 0.75
NEVER = -8.0  # the logit of a task that never passes at checkpoint 1
CASES = [(name, misfit) for name in POPULATIONS for misfit in (0.0, 0.5)]


def wrong_labels(rates: np.ndarray, labels: list[str]) -> np.ndarray:
    return np.array(
        [
            label not in stats.acceptable_bands(pass_rate=float(rate), thresholds=THRESHOLDS)
            for rate, label in zip(rates, labels)
        ]
    )


def case(name: str, misfit: float, *, tasks: int, sample: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    first = sample_population(POPULATIONS[name], tasks, rng)
    base = np.where(first <= 0.0, NEVER, special.logit(np.clip(first, 1e-9, 1 - 1e-9)))
    rates = [special.expit(base + step * STEP + rng.normal(0.0, misfit, tasks)) for step in range(3)]
    rates[0] = first
    table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    counts = []
    for checkpoint in (0, 1):
        _, attempts, passes = run_tables(table, rates[checkpoint], rng)
        counts += [(task, checkpoint, int(passes[task]), int(attempts[task])) for task in range(tasks)]
    codes, attempts, passes = run_tables(table, rates[2], rng)  # checkpoint 3, every task: the baseline
    full_labels = [str(stats.LABELS[code]) for code in codes]
    probed = rng.choice(tasks, size=sample, replace=False)
    counts += [(int(task), 2, int(passes[task]), int(attempts[task])) for task in probed]
    response = stats.fit_item_response(counts=counts, tasks=tasks, models=3)
    bands = stats.checkpoint_bands(
        response=response,
        counts=counts,
        ability=float(response.ability[2]),
        ability_sd=stats.ability_sd(response=response, counts=counts, model=2, penalty=0.1),
        thresholds=THRESHOLDS,
    )
    sampled = set(probed.tolist())
    reprofile_labels = list(full_labels)  # a probed task ends as the full probe would have it (same draws)
    spent = int(attempts[list(sampled)].sum())
    predicted = 0
    for band in bands:
        if band.task in sampled:
            continue
        if band.uncertain:
            spent += int(attempts[band.task])
        else:
            reprofile_labels[band.task] = band.band
            predicted += 1
    outside = outside_zones(rates[2])
    full_wrong = wrong_labels(rates[2], full_labels)[outside].mean()
    reprofile_wrong = wrong_labels(rates[2], reprofile_labels)[outside].mean()
    kept = np.array([not band.uncertain and band.task not in sampled for band in bands])
    predicted_wrong = wrong_labels(rates[2], reprofile_labels)[kept & outside].mean() if (kept & outside).any() else 0.0
    return {
        "population": name,
        "misfit": misfit,
        "full": int(attempts.sum()),
        "reprofile": spent,
        "predicted": predicted,
        "full_wrong": float(full_wrong),
        "reprofile_wrong": float(reprofile_wrong),
        "predicted_wrong": float(predicted_wrong),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    print(
        f"{args.tasks} tasks, sample {args.sample}, seed {args.seed}; "
        f"load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}"
    )
    print(
        "| population (checkpoint 1) | misfit | rollouts: full re-probe | re-profile | saved | predicted tasks |"
        " wrong: full | re-profile | among predicted |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, misfit in CASES:
        row = case(name, misfit, tasks=args.tasks, sample=args.sample, seed=args.seed)
        print(
            f"| {name} | {misfit} | {row['full']:,} | {row['reprofile']:,} | "
            f"{100 * (1 - row['reprofile'] / row['full']):.0f}% | {row['predicted']:,} | "
            f"{100 * row['full_wrong']:.2f}% | {100 * row['reprofile_wrong']:.2f}% | {100 * row['predicted_wrong']:.2f}% |"
        )
    print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
