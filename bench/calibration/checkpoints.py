"""Benchmark: rollouts saved by re-profiling a new checkpoint (predict the sure bands, probe the
uncertain tasks), against probing every task again with the default rule.

    .venv/bin/python bench/calibration/checkpoints.py [--tasks 2000] [--seed 0] [--seeds 1] [--sample 50] [--adversarial]

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

The model check (``stats.prediction_check``): before keeping any predicted band, the sample's tasks
are predicted without their own checkpoint-3 results; one beyond the family-wise limit and no band
is predicted (every task is probed, as the full re-probe). ``--adversarial`` adds priors that are
wrong on purpose: checkpoint 3 reverses the earlier checkpoints' order of difficulty ("reversed"),
or a share of tasks swap their checkpoint-3 pass rates at random ("scrambled 5%"), and reports
both the re-profile with the check and without it.
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


def corrupt(logits: np.ndarray, prior: str, rng: np.random.Generator) -> np.ndarray:
    """Checkpoint 3's logits when the prior from checkpoints 1 and 2 is wrong on purpose."""
    if prior == "reversed":  # the easiest tasks become the hardest, and the other way round
        order = np.argsort(logits)
        out = np.empty_like(logits)
        out[order] = logits[order[::-1]]
        return out
    if prior.startswith("scrambled"):  # a share of tasks swap pass rates at random
        share = float(prior.split()[1].rstrip("%")) / 100
        chosen = rng.choice(logits.size, size=max(2, round(share * logits.size)), replace=False)
        out = logits.copy()
        out[chosen] = logits[rng.permutation(chosen)]
        return out
    return logits


def reprofiled(bands, *, sampled: set[int], labels: list[str], attempts: np.ndarray) -> tuple[list[str], int, int]:
    """Labels, rollouts and predicted tasks of a re-profile that keeps the sure ``bands`` and probes the rest
    (a probed task ends as the full probe has it: the same draws)."""
    labels = list(labels)
    spent, predicted = int(attempts[list(sampled)].sum()), 0
    for band in bands:
        if band.task in sampled:
            continue
        if band.uncertain:
            spent += int(attempts[band.task])
        else:
            labels[band.task] = band.band
            predicted += 1
    return labels, spent, predicted


def case(name: str, misfit: float, *, tasks: int, sample: int, seed: int, prior: str = "model holds") -> dict:
    rng = np.random.default_rng(seed)
    first = sample_population(POPULATIONS[name], tasks, rng)
    base = np.where(first <= 0.0, NEVER, special.logit(np.clip(first, 1e-9, 1 - 1e-9)))
    logits = [base + step * STEP + rng.normal(0.0, misfit, tasks) for step in range(3)]
    logits[2] = corrupt(logits[2], prior, rng)
    rates = [special.expit(logit) for logit in logits]
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
    prediction = stats.predict_checkpoint(counts=counts, tasks=tasks, models=3, new_model=2, thresholds=THRESHOLDS)
    check = prediction.check
    sampled = set(probed.tolist())
    outside = outside_zones(rates[2])
    row = {"population": name, "misfit": misfit, "prior": prior, "check": check, "full": int(attempts.sum())}
    row["full_wrong"] = float(wrong_labels(rates[2], full_labels)[outside].mean())
    # With the check, as the service runs it (stats.predict_checkpoint). Without it (as before): the model's
    # bands as they are, neither widened nor refused.
    plain = stats.checkpoint_bands(
        response=prediction.response,
        counts=counts,
        ability=prediction.ability,
        ability_sd=prediction.ability_sd,
        thresholds=THRESHOLDS,
    )
    for variant, bands in (("plain", plain), ("checked", prediction.bands)):
        labels, spent, predicted = reprofiled(bands, sampled=sampled, labels=full_labels, attempts=attempts)
        kept = np.array([not band.uncertain and band.task not in sampled for band in bands]) & outside
        wrong = wrong_labels(rates[2], labels)
        row[variant] = {
            "rollouts": spent,
            "predicted": predicted,
            "wrong": float(wrong[outside].mean()),
            "predicted_wrong": float(wrong[kept].mean()) if kept.any() and predicted else 0.0,
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="Seeds from --seed; rows give their mean and worst.")
    parser.add_argument("--adversarial", action="store_true", help="Priors wrong on purpose (see above).")
    args = parser.parse_args()
    started = time.monotonic()
    print(
        f"{args.tasks} tasks, sample {args.sample}, seeds {args.seed}-{args.seed + args.seeds - 1}; "
        f"load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}"
    )
    cases = CASES
    if args.adversarial:
        priors = ["scrambled 2%", "scrambled 5%", "scrambled 10%", "scrambled 25%", "reversed"]
        cases = [(name, 0.0, prior) for name in ("uniform", "spike at 0 + near the floor") for prior in priors]
    print(
        "| population (checkpoint 1) | misfit | prior | model trusted (seeds) | rollouts: full re-probe |"
        " re-profile | saved | predicted tasks | wrong: full | re-profile (mean, worst) | among predicted (worst) |"
        " before the check: saved, wrong (mean, worst) |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|")
    for entry in cases:
        name, misfit, prior = entry if len(entry) == 3 else (*entry, "model holds")
        rows = [
            case(name, misfit, tasks=args.tasks, sample=args.sample, seed=seed, prior=prior)
            for seed in range(args.seed, args.seed + args.seeds)
        ]
        full = np.mean([row["full"] for row in rows])
        trusted = sum(row["check"].trusted for row in rows)
        checked, plain = ([row[variant] for row in rows] for variant in ("checked", "plain"))
        spent, before = np.mean([r["rollouts"] for r in checked]), np.mean([r["rollouts"] for r in plain])
        print(
            f"| {name} | {misfit} | {prior} | {trusted}/{len(rows)} | {full:,.0f} | {spent:,.0f} | "
            f"{100 * (1 - spent / full):.0f}% | {np.mean([r['predicted'] for r in checked]):,.0f} | "
            f"{100 * np.mean([row['full_wrong'] for row in rows]):.2f}% | "
            f"{100 * np.mean([r['wrong'] for r in checked]):.2f}%, {100 * max(r['wrong'] for r in checked):.2f}% | "
            f"{100 * max(r['predicted_wrong'] for r in checked):.2f}% | "
            f"{100 * (1 - before / full):.0f}%, {100 * np.mean([r['wrong'] for r in plain]):.2f}%, "
            f"{100 * max(r['wrong'] for r in plain):.2f}% |"
        )
    print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
