"""Benchmark: rollouts spent and bands got wrong, per population, by fixed N and adaptive calibration.

    .venv/bin/python bench/calibration/simulate.py [--environments 300] [--seed 0]

Every policy runs the stopping table that ``engine.stats`` produces (the code the service runs).
For a population given as a distribution of true pass rates, the numbers are exact: the
operating characteristic of the table (``operating_characteristic_curve``: label probabilities
and mean rollouts at each pass rate) is averaged over the population on a fine grid; no sampling.
Small environments (30-60 tasks, the population prior fitted while their tasks are still being
probed) are simulated, seeded. Prints Markdown (pasted into docs/benchmarks-calibration.md).

Definitions (thresholds: floor 2%, retire_at 70%, zones [1%, 4%) and [60%, 80%)):
* wrong: the final label is not acceptable: outside the zones anything but the true band,
  inside a zone anything but its two neighbouring bands; ``borderline`` is always wrong.
* error outside zones: P(wrong) among tasks whose true pass rate lies outside both zones.
* worst slice: the largest P(wrong) over the slices of true pass rate in SLICES.
* Bayes bound: the Bayes-optimal table for the true population (``bayes_optimal_table``), its
  rollout cost tuned so that its error outside the zones equals the default's: the fewest mean
  rollouts any policy could spend for that error knowing the population exactly.
* Frontier (``--frontier``): the same bound at 1% error outside the zones, for a policy that may
  stop after any single rollout and go on to 512: the fewest mean rollouts any policy at all
  could spend for issue 13's 1% on that population; and a lower bound for policies that also
  keep every slice within 5% (``lower_bound_with_slices``). Slow (minutes per population).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine import stats

THRESHOLDS = stats.Thresholds()
GRID = np.unique(np.concatenate([[0.0], np.linspace(0.00025, 0.12, 480), np.linspace(0.12, 1.0, 353)]))
SLICES = [
    (0.0, 0.0),
    (0.0, 0.01),
    (0.04, 0.07),
    (0.07, 0.10),
    (0.10, 0.20),
    (0.20, 0.40),
    (0.40, 0.60),
    (0.80, 0.90),
    (0.90, 1.0),
]
SLICE_NAMES = [
    "0",
    "(0, 1%)",
    "[4%, 7%)",
    "[7%, 10%)",
    "[10%, 20%)",
    "[20%, 40%)",
    "[40%, 60%)",
    "[80%, 90%)",
    "[90%, 100%]",
]

# Each population: (share, kind, a, b) parts; kind "zero" (p = 0), "uniform" on [a, b), "beta"(a, b).
POPULATIONS = {
    "spike at 0 + near the floor": [(0.40, "zero", 0, 0), (0.30, "uniform", 0.0, 0.10), (0.30, "uniform", 0.10, 1.0)],
    "previous bench (35% at 0)": [
        (0.35, "zero", 0, 0),
        (0.20, "uniform", 0.0, 0.05),
        (0.30, "uniform", 0.05, 0.70),
        (0.15, "uniform", 0.70, 1.0),
    ],
    "bimodal": [(0.5, "beta", 0.5, 15.0), (0.5, "beta", 6.0, 2.0)],
    "uniform": [(1.0, "uniform", 0.0, 1.0)],
    "mostly easy": [(0.8, "beta", 6.0, 1.5), (0.2, "uniform", 0.0, 1.0)],
}
SMALL_ENVIRONMENTS = "spike at 0 + near the floor"


@dataclass(frozen=True)
class Method:
    name: str
    policy: stats.SamplingPolicy
    population_prior: bool = False  # the previous default: posterior rule + empirical-Bayes prior


DEFAULT = stats.SamplingPolicy()  # calibrated rule, confidence 0.95, cap 256, rounds of 8
METHODS = [
    Method("fixed N=16", stats.SamplingPolicy(kind="fixed", fixed_n=16, labels="raw")),
    Method("fixed N=64", stats.SamplingPolicy(kind="fixed", fixed_n=64, labels="raw")),
    Method("previous default (posterior rule + population prior, 0.95)", stats.SamplingPolicy(rule="posterior"), True),
    Method("previous rule, Jeffreys, 0.99", stats.SamplingPolicy(rule="posterior", confidence=0.99)),
    Method("**default: calibrated, 0.95, cap 256**", DEFAULT),
    Method("calibrated, 0.97, cap 256", stats.SamplingPolicy(confidence=0.97)),
]


def population_weights(parts) -> np.ndarray:
    """Probability mass of the population on each GRID point (cells between midpoints)."""
    weights = np.zeros(GRID.size)
    edges = np.concatenate([[0.0], (GRID[1:-1] + GRID[2:]) / 2.0, [1.0]])  # cells of GRID[1:]
    low, high = edges[:-1], edges[1:]
    for share, kind, a, b in parts:
        if kind == "zero":
            weights[0] += share
        elif kind == "uniform":
            weights[1:] += share * np.clip(np.minimum(high, b) - np.maximum(low, a), 0.0, None) / (b - a)
        else:
            weights[1:] += share * (scipy_stats.beta.cdf(high, a, b) - scipy_stats.beta.cdf(low, a, b))
    return weights / weights.sum()


def sample_population(parts, size: int, rng: np.random.Generator) -> np.ndarray:
    shares = np.array([part[0] for part in parts])
    which = rng.choice(len(parts), size=size, p=shares / shares.sum())
    rates = np.zeros(size)
    for index, (_, kind, a, b) in enumerate(parts):
        chosen = which == index
        if kind == "uniform":
            rates[chosen] = rng.uniform(a, b, chosen.sum())
        elif kind == "beta":
            rates[chosen] = rng.beta(a, b, chosen.sum())
    return rates


def outside_zones(rates: np.ndarray) -> np.ndarray:
    (floor_low, floor_high), (retire_low, retire_high) = THRESHOLDS.floor_zone, THRESHOLDS.retire_zone
    return ~(((rates >= floor_low) & (rates < floor_high)) | ((rates >= retire_low) & (rates < retire_high)))


def in_slice(rates: np.ndarray, low: float, high: float) -> np.ndarray:
    if low == high:
        return rates == low
    if high >= 1.0:
        return rates >= low
    return (rates > low if low == 0.0 else rates >= low) & (rates < high)


def summarise(rates, weights, wrong, rollouts) -> dict:
    outside = outside_zones(rates)
    per_slice = []
    for low, high in SLICES:
        mask = in_slice(rates, low, high) & outside
        mass = weights[mask].sum()
        per_slice.append(float(weights[mask] @ wrong[mask] / mass) if mass > 1e-9 else None)
    worst = max((value, name) for value, name in zip(per_slice, SLICE_NAMES) if value is not None)
    return {
        "rollouts": float(weights @ rollouts),
        "error": float(weights[outside] @ wrong[outside] / weights[outside].sum()),
        "slices": per_slice,
        "worst": worst,
    }


def fitted_prior(parts, rng: np.random.Generator, pilot: int = 2000) -> stats.Beta:
    """The previous default's prior: fitted on a pilot calibrated with Jeffreys (as the service did)."""
    rates = sample_population(parts, pilot, rng)
    table = stats.stopping_table(thresholds=THRESHOLDS, policy=stats.SamplingPolicy(rule="posterior"))
    _, attempts, passes = run_tables(table, rates, rng)
    return stats.fit_population_prior(evidence=list(zip(passes.tolist(), attempts.tolist()))) or stats.JEFFREYS_PRIOR


def run_tables(table: stats.StoppingTable, rates: np.ndarray, rng: np.random.Generator):
    """Simulate tasks through one stopping table: labels, attempts and passes at the stop."""
    schedule = table.attempts
    outcomes = rng.random((rates.size, schedule[-1])) < rates[:, None]
    cumulative = np.concatenate([np.zeros((rates.size, 1), dtype=int), np.cumsum(outcomes, axis=1)], axis=1)
    labels = np.full(rates.size, -1)
    attempts = np.zeros(rates.size, dtype=int)
    passes = np.zeros(rates.size, dtype=int)
    for round_attempts, codes in zip(schedule, table.labels):
        open_tasks = np.flatnonzero(labels < 0)
        round_passes = cumulative[open_tasks, round_attempts]
        round_codes = codes[round_passes]
        stopped = open_tasks[round_codes >= 0]
        labels[stopped] = round_codes[round_codes >= 0]
        attempts[stopped], passes[stopped] = round_attempts, round_passes[round_codes >= 0]
    return labels, attempts, passes


def small_environments(method: Method, count: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Environments of 30-60 tasks probed round by round; a population prior is refitted on the
    environment's own evidence after every round (once 30 tasks have some), as the service does."""
    parts = POPULATIONS[SMALL_ENVIRONMENTS]
    policy = method.policy
    schedule = stats.stopping_table(thresholds=THRESHOLDS, policy=policy).attempts
    all_rates, all_wrong, all_rollouts = [], [], []
    for _ in range(count):
        rates = sample_population(parts, int(rng.integers(30, 61)), rng)
        outcomes = rng.random((rates.size, schedule[-1])) < rates[:, None]
        cumulative = np.concatenate([np.zeros((rates.size, 1), dtype=int), np.cumsum(outcomes, axis=1)], axis=1)
        labels = np.full(rates.size, -1)
        spent = np.zeros(rates.size, dtype=int)
        for round_attempts in schedule:
            prior = stats.JEFFREYS_PRIOR
            if method.population_prior:
                done = labels >= 0
                evidence = [
                    (
                        int(cumulative[t, spent[t] if done[t] else round_attempts]),
                        int(spent[t] if done[t] else round_attempts),
                    )
                    for t in range(rates.size)
                ]
                prior = stats.fit_population_prior(evidence=evidence) or stats.JEFFREYS_PRIOR
            open_tasks = np.flatnonzero(labels < 0)
            if policy.kind == "fixed":
                codes = stats.stopping_table(thresholds=THRESHOLDS, policy=policy).labels[0][
                    cumulative[open_tasks, round_attempts]
                ]
            else:
                codes = stats.decision_codes(
                    successes=cumulative[open_tasks, round_attempts],
                    attempts=round_attempts,
                    thresholds=THRESHOLDS,
                    policy=policy,
                    prior=prior,
                )
                if round_attempts >= policy.cap:
                    codes = np.where(codes < 0, stats.LABELS.index(stats.BORDERLINE), codes)
            stopped = codes >= 0
            labels[open_tasks[stopped]] = codes[stopped]
            spent[open_tasks[stopped]] = round_attempts
        right = np.array(
            [
                stats.LABELS[label] in stats.acceptable_bands(pass_rate=rate, thresholds=THRESHOLDS)
                for label, rate in zip(labels, rates)
            ]
        )
        all_rates.append(rates)
        all_wrong.append(~right)
        all_rollouts.append(spent)
    return (
        np.concatenate(all_rates),
        np.concatenate(all_wrong).astype(float),
        np.concatenate(all_rollouts).astype(float),
    )


FULLY_SEQUENTIAL = stats.SamplingPolicy(round_size=1, cap=512)


def bayes_bound(
    weights: np.ndarray, target_error: float, policy: stats.SamplingPolicy = DEFAULT, steps: int = 14
) -> dict:
    """Bisect the rollout cost until the Bayes-optimal table's error outside the zones is the target."""
    low, high = np.log(1e-6), np.log(1e-1)
    best = None
    for _ in range(steps):
        cost = float(np.exp((low + high) / 2.0))
        table = stats.bayes_optimal_table(
            thresholds=THRESHOLDS, policy=policy, pass_rates=GRID, weights=weights, rollout_cost=cost
        )
        curve = stats.operating_characteristic_curve(thresholds=THRESHOLDS, policy=policy, pass_rates=GRID, table=table)
        result = summarise(GRID, weights, np.array(curve.wrong), np.array(curve.expected_attempts))
        if result["error"] > target_error:
            high = np.log(cost)
        else:
            low, best = np.log(cost), result
    return best


def slice_masks() -> list[np.ndarray]:
    outside = outside_zones(GRID)
    return [in_slice(GRID, low, high) & outside for low, high in SLICES]


def lower_bound_with_slices(weights: np.ndarray, policy: stats.SamplingPolicy, iterations: int = 24) -> dict:
    """The fewest mean rollouts of any policy with <= 1% error outside the zones and <= 5% in every
    slice: ``lower_bound_with_strata`` with one stratum, and its worst slice by name."""
    best = lower_bound_with_strata(weights[None, :], policy, iterations)
    if "slices" in best:
        best["worst"] = max((value, SLICE_NAMES[index]) for index, value in best["slices"].items())
    return best


def lower_bound_with_strata(
    masses: np.ndarray, policy: stats.SamplingPolicy, iterations: int = 24, grid: np.ndarray = GRID
) -> dict:
    """The fewest mean rollouts of any policy that knows each task's stratum, with <= 1% error outside
    the zones and <= 5% in every slice over the whole environment. ``masses[k]``: stratum k's share
    of the tasks at each ``grid`` rate (all strata together sum to 1); one stratum is bound B.

    Weak duality: for such a policy and any prices mu, lam_s >= 0, E[rollouts] >= V - mu * 1% -
    sum_s lam_s * 5%, where V is the least E[rollouts] + mu * error + sum_s lam_s * slice error
    over all policies: with prices shared by every stratum it separates, each stratum's
    Bayes-optimal table at those prices (``stats.priced_table`` with the environment's masses).
    The prices are raised where the optimum breaks a limit and lowered where it keeps it
    (multiplicative subgradient steps); the best bound found is a valid lower bound whatever the
    prices. ``slices`` in the result: the error in each live slice (``stats.error_slices`` order)."""
    outside = outside_zones(grid)
    total = masses.sum(axis=0)
    masks = [in_slice(grid, low, high) & outside for _, low, high in stats.error_slices(THRESHOLDS)]
    live = [index for index, mask in enumerate(masks) if total[mask].sum() > 1e-9]
    error_price, slice_prices = 2000.0, {index: 200.0 for index in live}
    best: dict = {"bound": 0.0}
    for step in range(iterations):
        rollouts, wrong_mass = 0.0, np.zeros(grid.size)
        for stratum in masses:
            if stratum.sum() <= 0.0:
                continue
            table = stats.priced_table(
                thresholds=THRESHOLDS,
                policy=policy,
                pass_rates=grid,
                weights=stratum,
                error_price=error_price,
                slice_prices={index: (masks[index], price) for index, price in slice_prices.items()},
                outside=outside,
                masses=total,
            )
            curve = stats.operating_characteristic_curve(
                thresholds=THRESHOLDS, policy=policy, pass_rates=grid, table=table
            )
            rollouts += float(stratum @ np.array(curve.expected_attempts))
            wrong_mass += stratum * np.array(curve.wrong)
        error = float(wrong_mass[outside].sum() / total[outside].sum())
        slices = {index: float(wrong_mass[masks[index]].sum() / total[masks[index]].sum()) for index in live}
        value = rollouts + error_price * error + sum(slice_prices[index] * slices[index] for index in live)
        bound = value - error_price * 0.01 - sum(price * 0.05 for price in slice_prices.values())
        if bound > best["bound"]:
            best = {"bound": bound, "rollouts": rollouts, "error": error, "slices": slices}
        rate = 0.6 / (1.0 + step / 6.0)
        error_price *= float(np.exp(rate * np.clip(error / 0.01 - 1.0, -1.0, 3.0)))
        for index in live:
            slice_prices[index] = max(
                1.0, slice_prices[index] * float(np.exp(rate * np.clip(slices[index] / 0.05 - 1.0, -1.0, 3.0)))
            )
    return best


def percent(value) -> str:
    return "–" if value is None else f"{value:.2%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--environments", type=int, default=300, help="small environments to simulate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--frontier", action="store_true", help="also the fewest rollouts any policy needs for 1%% error (slow)"
    )
    arguments = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(arguments.seed)

    results: dict[str, dict[str, dict]] = {}
    for population, parts in POPULATIONS.items():
        weights = population_weights(parts)
        results[population] = {}
        for method in METHODS:
            prior = fitted_prior(parts, rng) if method.population_prior else stats.JEFFREYS_PRIOR
            curve = stats.operating_characteristic_curve(
                thresholds=THRESHOLDS, policy=method.policy, prior=prior, pass_rates=GRID
            )
            results[population][method.name] = summarise(
                GRID, weights, np.array(curve.wrong), np.array(curve.expected_attempts)
            )
        target = results[population][METHODS[4].name]["error"]
        results[population]["Bayes bound at the default's error (knows the population)"] = bayes_bound(weights, target)
    small = f"small environments (30-60 tasks, {arguments.environments} of them, {SMALL_ENVIRONMENTS})"
    results[small] = {}
    for method in METHODS:
        rates, wrong, rollouts = small_environments(method, arguments.environments, rng)
        results[small][method.name] = summarise(rates, np.full(rates.size, 1.0 / rates.size), wrong, rollouts)

    print(f"Thresholds {THRESHOLDS}; seed {arguments.seed}\n")
    print("| population | method | mean rollouts | error outside zones | worst slice |")
    print("|---|---|---:|---:|---|")
    for population, rows in results.items():
        for name, row in rows.items():
            worst_value, worst_name = row["worst"]
            print(
                f"| {population} | {name} | {row['rollouts']:.1f} | {row['error']:.2%} | {worst_value:.1%} in {worst_name} |"
            )

    print("\nError by slice of true pass rate (outside the zones), the default policy:\n")
    print("| population | " + " | ".join(SLICE_NAMES) + " |")
    print("|---|" + "---:|" * len(SLICE_NAMES))
    for population, rows in results.items():
        print(f"| {population} | " + " | ".join(percent(value) for value in rows[METHODS[4].name]["slices"]) + " |")

    edges = [0.0, 0.005, 0.0099, 0.04, 0.05, 0.07, 0.10, 0.30, 0.599, 0.80, 0.90]
    print("\nOperating characteristic: P(wrong) (mean rollouts) at single true pass rates, exact:\n")
    print("| method | " + " | ".join(f"p = {edge:g}" for edge in edges) + " |")
    print("|---|" + "---:|" * len(edges))
    for method in METHODS:
        if method.population_prior:
            continue
        curve = stats.operating_characteristic_curve(thresholds=THRESHOLDS, policy=method.policy, pass_rates=edges)
        cells = [f"{wrong:.1%} ({rollouts:.0f})" for wrong, rollouts in zip(curve.wrong, curve.expected_attempts)]
        print(f"| {method.name} | " + " | ".join(cells) + " |")
    levels = stats.calibrated_levels(thresholds=THRESHOLDS, policy=DEFAULT)
    print(
        f"\nDefault's calibrated levels: {', '.join(f'{name} {value:.4f}' for name, value in levels._asdict().items())}"
    )
    if arguments.frontier:
        print("\nFrontier: the fewest mean rollouts any policy can spend, knowing the population. A: at most 1%")
        print("error outside the zones, stopping after any single rollout, up to 512 (the Bayes-optimal policy).")
        print("B: at most 1% error and at most 5% in every slice, rounds of 8 up to 256 as Passband probes")
        print("(a Lagrangian lower bound, and the Bayes-optimal policy at the prices that give it):\n")
        print(
            "| population | default: mean rollouts | default: error | A: mean rollouts | A: worst slice "
            "| B: lower bound | B: policy at those prices: mean rollouts | its error | its worst slice |"
        )
        print("|---|---:|---:|---:|---|---:|---:|---:|---|")
        for population, parts in POPULATIONS.items():
            row = results[population][METHODS[4].name]
            weights = population_weights(parts)
            unconstrained = bayes_bound(weights, 0.01, FULLY_SEQUENTIAL, steps=18)
            constrained = lower_bound_with_slices(weights, DEFAULT)
            print(
                f"| {population} | {row['rollouts']:.1f} | {row['error']:.2%} | {unconstrained['rollouts']:.1f} | "
                f"{unconstrained['worst'][0]:.1%} in {unconstrained['worst'][1]} | {constrained['bound']:.1f} | "
                f"{constrained['rollouts']:.1f} | {constrained['error']:.2%} | "
                f"{constrained['worst'][0]:.1%} in {constrained['worst'][1]} |"
            )
    print(f"\nRan in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
