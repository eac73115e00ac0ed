"""Benchmark: the item-response prior on real neighbours, against bound B.

    .venv/bin/python bench/calibration/real_reprofile.py [--counts bench/calibration/real_side_counts.json] \\
        [--tasks 2000] [--sample 50] [--seeds 4]

Side information of the kind item 2 of issue 28 names, "the same task's results on another probe
model or an earlier checkpoint", used the way a re-profile uses it (calibration.services.checkpoints):
the other rung has calibrated every task; the probe model probes a random ``--sample``; the
item-response model is fitted on both; the sample tests it (``stats.prediction_check``) and widens
every prediction by the misfit it cannot rule out; bands at least 0.95 probable are kept with no
rollouts and the rest are probed with the default rule. The rollouts counted are the probe model's
(the sample's and the uncertain tasks'): the other rung's calibration is already paid for.

The two rungs are real: SmolLM2-135M sampled through llama.cpp on the demo arithmetic ladder and
HumanEval, every completion checked by Passband's verifier (``real_side.py collect``; the counts file
holds each task's passes and attempts per rung). The benchmark environment draws ``--tasks`` tasks
from the real ones with replacement; each keeps its real results on the other rung as they were
sampled (its calibration there) and gets a true probe pass rate from the Jeffreys posterior of its
real probe counts, so the relation between the rungs is only what the real tasks show. Bound B is computed for the probe rung's population as in ``simulate.py --frontier``:
the fewest rollouts of any policy in rounds of 8 that knows the population (but nothing per task)
and keeps ≤ 1% wrong outside the zones and ≤ 5% in every slice. Wrong: outside the zones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from checkpoints import reprofiled, wrong_labels  # noqa: E402
from simulate import DEFAULT, GRID, THRESHOLDS, lower_bound_with_slices, outside_zones, run_tables  # noqa: E402

from engine import stats  # noqa: E402


def environment(real: dict, other: str, tasks: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``tasks`` tasks drawn from the real ones: the other rung's real (passes, attempts) of each, and a
    true probe pass rate from the Jeffreys posterior of its real probe counts."""
    keys = list(real)
    drawn = rng.integers(0, len(keys), tasks)
    other_counts = np.array([real[keys[index]][other] for index in drawn], dtype=int)
    probe = np.array([real[keys[index]]["probe"] for index in drawn], dtype=float)
    return other_counts, rng.beta(probe[:, 0] + 0.5, probe[:, 1] - probe[:, 0] + 0.5)


def case(real: dict, *, other: str, tasks: int, sample: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    other_counts, rates = environment(real, other, tasks, rng)
    table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    counts = [(task, 0, int(other_counts[task, 0]), int(other_counts[task, 1])) for task in range(tasks)]
    codes, attempts, passes = run_tables(table, rates, rng)  # the probe rung, every task: the default
    full_labels = [str(stats.LABELS[code]) for code in codes]
    probed = rng.choice(tasks, size=sample, replace=False)
    counts += [(int(task), 1, int(passes[task]), int(attempts[task])) for task in probed]
    prediction = stats.predict_checkpoint(counts=counts, tasks=tasks, models=2, new_model=1, thresholds=THRESHOLDS)
    labels, spent, predicted = reprofiled(
        prediction.bands, sampled=set(probed.tolist()), labels=full_labels, attempts=attempts
    )
    outside = outside_zones(rates)
    weights = np.histogram(rates, bins=np.concatenate([[-1e-12], (GRID[:-1] + GRID[1:]) / 2.0, [1.0 + 1e-12]]))[0]
    return {
        "spearman": float(scipy_stats.spearmanr(other_counts[:, 0] / other_counts[:, 1], rates).statistic),
        "bound": lower_bound_with_slices(weights / weights.sum(), DEFAULT, iterations=16)["bound"],
        "default": float(attempts.mean()),
        "default_wrong": float(wrong_labels(rates, full_labels)[outside].mean()),
        "rollouts": spent / tasks,
        "wrong": float(wrong_labels(rates, labels)[outside].mean()),
        "predicted": predicted,
        "check": prediction.check,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="bench/calibration/real_side_counts.json")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    started = time.monotonic()
    data = json.loads(Path(args.counts).read_text())
    real = data["tasks"]
    others = [rung for rung in data.get("rungs", {}) if rung != "probe"] or ["neighbour"]
    print(
        f"{len(real)} real tasks, rungs {data.get('rungs')}; environment of {args.tasks}, sample {args.sample}, "
        f"seeds {args.seed}-{args.seed + args.seeds - 1}; load average {os.getloadavg()[0]:.2f}"
    )
    print(
        "| other rung | Spearman with the probe rung | bound B | default: rollouts, wrong | model trusted (seeds) |"
        " predicted tasks | re-profile: rollouts | against bound B | wrong (mean, worst) |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---|")
    for other in others:
        rows = [
            case(real, other=other, tasks=args.tasks, sample=args.sample, seed=seed)
            for seed in range(args.seed, args.seed + args.seeds)
        ]
        mean = {
            key: float(np.mean([row[key] for row in rows]))
            for key in ("spearman", "bound", "default", "default_wrong", "rollouts", "wrong", "predicted")
        }
        print(
            f"| {other} | {mean['spearman']:.2f} | {mean['bound']:.1f} | {mean['default']:.1f}, "
            f"{100 * mean['default_wrong']:.2f}% | {sum(row['check'].trusted for row in rows)}/{len(rows)} | "
            f"{mean['predicted']:,.0f} | {mean['rollouts']:.1f} | {100 * (mean['rollouts'] / mean['bound'] - 1):+.0f}% | "
            f"{100 * mean['wrong']:.2f}%, {100 * max(row['wrong'] for row in rows):.2f}% |"
        )
    print(f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
