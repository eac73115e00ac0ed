"""Benchmark: how far under bound B any policy can get with side information, by how good it is.

    .venv/bin/python bench/calibration/side_bound.py [--strata 1 4 20 50] [--sigmas 0 0.5 1 2] [--tasks 200000]

Issue 28's item 2 asks for 30% fewer rollouts than bound B where the prior is as good as real
neighbours give (Spearman 0.72-0.76 with the probe rate here, docs/benchmarks-calibration.md, "On
real neighbours"). This measures what that asks of the score, for any policy, not only Passband's.

For a population of ``simulate.py``, each task's score is its pass rate under a cheaper model,
**known exactly** (the probe model's logit moved by -1 plus per-task noise of sd ``sigma``, as in
side.py; a task that never passes scores lowest). A real score is estimated from that model's own
rollouts, so it knows less. The tasks are cut into ``strata`` quantiles of score and each stratum's
exact population is tabulated. A policy that knows every task's stratum and every stratum's
population, probing in rounds of 8 up to 256 and held to at most 1% wrong outside the zones and 5%
in every slice over the whole environment, spends at least L: weak duality with prices shared by
every stratum (each price's Bayes-optimal table per stratum, ``stats.priced_table``; the prices
moved by multiplicative subgradient steps; the best bound found is valid whatever the prices). One
stratum is bound B on this grid. More strata approach a policy that sees the score itself, so the
finest column is the one to read; the bound is a floor, not a policy Passband runs.
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

from simulate import DEFAULT, POPULATIONS, lower_bound_with_strata, sample_population  # noqa: E402

SHIFT = -1.0  # the cheaper model's logit against the probe model's (side.py)
# Coarser than simulate.py's GRID (the bound takes one Bayes-optimal table per stratum and step);
# bound B is recomputed on it (one stratum), so every ratio compares like with like.
GRID = np.unique(
    np.concatenate([[0.0], np.linspace(0.0005, 0.12, 120), np.linspace(0.12, 1.0, 89), [0.01, 0.04, 0.6, 0.8]])
)


def strata_on_grid(population: str, sigma: float, strata: int, tasks: int, seed: int) -> tuple[np.ndarray, float]:
    """(mass of each stratum at each grid rate, shape (strata, len(GRID)), summing to 1; Spearman of
    the score with the true rate). The score is the cheaper model's exact pass rate."""
    rng = np.random.default_rng(seed)
    rates = sample_population(POPULATIONS[population], tasks, rng)
    logits = special.logit(np.clip(rates, 1e-9, 1 - 1e-9))
    scores = np.where(rates == 0.0, -np.inf, logits + SHIFT + rng.normal(0.0, sigma, tasks))
    finite = np.isfinite(scores)
    correlation = float(scipy_stats.spearmanr(np.where(finite, scores, scores[finite].min() - 1), rates).statistic)
    return masses_by_stratum(rates, scores, strata, rng), correlation


def masses_by_stratum(rates: np.ndarray, scores: np.ndarray, strata: int, rng: np.random.Generator) -> np.ndarray:
    """Tasks (true ``rates``, side-information ``scores``) cut into ``strata`` quantiles of score (ties
    split at random): each stratum's share of the tasks at each GRID rate, shape (strata, len(GRID))."""
    order = np.lexsort((rng.random(rates.size), scores))
    which = np.empty(rates.size, dtype=int)
    which[order] = np.arange(rates.size) * strata // rates.size
    cell = np.clip(np.searchsorted((GRID[1:] + GRID[:-1]) / 2.0, rates), 0, GRID.size - 1)
    mass = np.zeros((strata, GRID.size))
    np.add.at(mass, (which, cell), 1.0 / rates.size)
    return mass


def bound_with_strata(mass: np.ndarray, iterations: int = 20) -> dict:
    """The Lagrangian lower bound on mean rollouts over policies that see each task's stratum, on GRID."""
    return lower_bound_with_strata(mass, DEFAULT, iterations, grid=GRID)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--populations", nargs="+", default=["uniform", "spike at 0 + near the floor"])
    parser.add_argument("--sigmas", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0])
    parser.add_argument("--strata", type=int, nargs="+", default=[4, 20, 50])
    parser.add_argument("--tasks", type=int, default=200_000, help="tasks drawn to tabulate the strata")
    parser.add_argument("--iterations", type=int, default=40, help="subgradient steps on the prices")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    started = time.perf_counter()
    columns = " | ".join(f"{count} strata: L, / B" for count in arguments.strata)
    print(f"| population | noise (sd, logit) | Spearman with the true rate | bound B (1 stratum) | {columns} |")
    print("|---|---:|---:|---:|" + "---:|" * len(arguments.strata))
    for population in arguments.populations:
        whole, _ = strata_on_grid(population, 0.0, 1, arguments.tasks, arguments.seed)
        bound_b = bound_with_strata(whole, arguments.iterations)["bound"]
        for sigma in arguments.sigmas:
            cells = []
            correlation = 0.0
            for count in arguments.strata:
                mass, correlation = strata_on_grid(population, sigma, count, arguments.tasks, arguments.seed)
                bound = bound_with_strata(mass, arguments.iterations)["bound"]
                cells.append(f"{bound:.1f}, {bound / bound_b - 1:+.0%}")
            print(f"| {population} | {sigma:g} | {correlation:.2f} | {bound_b:.1f} | {' | '.join(cells)} |", flush=True)
    print(f"\nRan in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
