"""Benchmark: the stopping table learned from an environment's own probes, against the calibrated rule.

    .venv/bin/python bench/calibration/learned.py [--pilot 1000] [--seeds 3] [--harmful] [--random 100]

For each population of ``simulate.py`` and a few adversarial ones (mass piled against the floor
zone's top edge), ``--seeds`` times: the first ``--pilot`` tasks of an environment are calibrated
with the default rule (what an environment has probed before it can learn anything), the
population is fitted on their (passes, attempts) (``stats.fit_population``), the guarded table is
learned (``stats.learned_table``, given the evidence, as the service does: used only if it harms no
population the evidence allows), and that table's exact operating characteristic is averaged over
the true population (the tasks that come after the pilot). ``--harmful``: populations the pilots
allow, built to harm the table learned without that check (``harmful``). ``--random``: that many
populations drawn at random (``random_populations``: populations nobody tuned the method to), one
pilot each. Prints Markdown for
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
    SLICE_NAMES,
    SLICES,
    THRESHOLDS,
    in_slice,
    outside_zones,
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
    return learned_from(pilot_evidence(sample_population(parts, pilot, rng), rng))


def pilot_evidence(rates: np.ndarray, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(passes, attempts) of tasks with these pass rates, calibrated with the default rule."""
    _, attempts, passes = run_tables(stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT), rates, rng)
    return list(zip(passes.tolist(), attempts.tolist()))


def learned_from(evidence: list[tuple[int, int]], checked: bool = True) -> stats.LearnedTable:
    """As the service learns (``stats.learned_table_from_evidence``), with this run's targets."""
    return stats.learned_table_from_evidence(
        evidence=evidence, thresholds=THRESHOLDS, policy=DEFAULT, checked=checked, **TARGETS
    )


def harmful(pilot: int, seeds: int) -> None:
    """Populations a pilot allows, built to harm the table learned without the check: for each
    population and pilot seed, the population within PLAUSIBLE_NATS of the pilot's best fit where
    that table is most wrong beyond the rule (``stats.most_damaging``); then three environments
    drawn from it, each learning again from its own pilot, with and without the check. A table
    harms the population when it is wrong more often than max(1%, the rule) there."""
    print(
        "| population | pilot seed | the rule's error there | unchecked table of the first pilot "
        "| learned again without the check (3 pilots) | with the check (3 pilots) |"
    )
    print("|---|---:|---:|---:|---|---|")
    default = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    totals = {"unchecked": 0, "checked": 0, "runs": 0}
    for name, parts in POPULATIONS.items():
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            evidence = pilot_evidence(sample_population(parts, pilot, rng), rng)
            first = learned_from(evidence, checked=False)
            region = stats.plausible_region(evidence=evidence, thresholds=THRESHOLDS)
            rates = region.rates
            outside = ~(
                ((rates >= THRESHOLDS.floor_zone[0]) & (rates < THRESHOLDS.floor_zone[1]))
                | ((rates >= THRESHOLDS.retire_zone[0]) & (rates < THRESHOLDS.retire_zone[1]))
            )

            def wrong(table: stats.StoppingTable, rates: np.ndarray = rates) -> np.ndarray:
                return np.array(
                    stats.operating_characteristic_curve(
                        thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=rates, table=table
                    ).wrong
                )

            weights = stats.most_damaging(region, outside * (wrong(first.table) - wrong(default)))
            harmed = stats.Population(tuple(rates.tolist()), tuple(weights.tolist()), pilot)

            def error(table: stats.StoppingTable, harmed: stats.Population = harmed) -> float:
                return stats.table_performance(table=table, population=harmed, thresholds=THRESHOLDS).error

            bound = max(0.01, error(default))
            cells = {"unchecked": [], "checked": []}
            for again in range(3):
                drawn = np.random.default_rng(100 + again)
                evidence = pilot_evidence(drawn.choice(rates, size=pilot, p=weights / weights.sum()), drawn)
                for label, checked in (("unchecked", False), ("checked", True)):
                    value = error(learned_from(evidence, checked=checked).table)
                    cells[label].append(value)
                    totals[label] += value > bound * (1 + 1e-9)
                totals["runs"] += 1
            print(
                f"| {name} | {seed} | {error(default):.2%} | {error(first.table):.2%} "
                f"| {', '.join(f'{value:.2%}' for value in cells['unchecked'])} "
                f"| {', '.join(f'{value:.2%}' for value in cells['checked'])} |",
                flush=True,
            )
    print(
        f"\nHarmed (wrong more often than max(1%, the rule)): without the check {totals['unchecked']} of "
        f"{totals['runs']}, with it {totals['checked']} of {totals['runs']}"
    )


def random_population(rng: np.random.Generator) -> list[tuple]:
    """One to three parts with random shares (Dirichlet(1)), each a point mass at 0 (one in five),
    a Beta with both parameters log-uniform in [0.3, 20] (two in five) or a uniform piece of
    log-uniform width in [0.5%, 50%] anywhere in [0, 1] (two in five)."""
    parts = []
    for share in rng.dirichlet(np.ones(int(rng.integers(1, 4)))):
        kind = rng.random()
        if kind < 0.2:
            parts.append((float(share), "zero", 0, 0))
        elif kind < 0.6:
            a, b = np.exp(rng.uniform(np.log(0.3), np.log(20.0), 2))
            parts.append((float(share), "beta", float(a), float(b)))
        else:
            width = float(np.exp(rng.uniform(np.log(0.005), np.log(0.5))))
            low = float(rng.uniform(0.0, 1.0 - width))
            parts.append((float(share), "uniform", low, low + width))
    return parts


def random_populations(count: int, pilot: int) -> None:
    """``count`` random populations (``random_population``, seeded 10,000 + index), one pilot each
    (seed: the index), learned with and without the check. A table harms a population when it is
    wrong outside the zones more often than max(1%, the rule), and breaks a slice when it is wrong
    there more often than max(5%, the rule); each break is listed with the slice's share of tasks."""
    default_table = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    outside = outside_zones(GRID)
    tally = {"populations": 0, "learned": 0, "harmed": 0, "harmed unchecked": 0, "saved": []}
    closest = (0.0, 0.0, 0.0, -1)  # a learned table's error over its bound, at its worst: ratio, error, bound, index
    breaks = []
    for index in range(count):
        parts = random_population(np.random.default_rng(10_000 + index))
        weights = population_weights(parts)
        if weights[outside].sum() < 1e-9:
            continue  # every task inside a zone: nothing to be wrong about
        tally["populations"] += 1
        default = on_population(default_table, weights)
        rates = sample_population(parts, pilot, np.random.default_rng(index))
        evidence = pilot_evidence(rates, np.random.default_rng(index))
        for checked in (True, False):
            learned = learned_from(evidence, checked=checked)
            result = on_population(learned, weights)
            harmed = result["error"] > max(0.01, default["error"]) * (1 + 1e-9)
            tally["harmed" if checked else "harmed unchecked"] += harmed
            if checked:
                bound = max(0.01, default["error"])
                if learned.learned:
                    closest = max(closest, (result["error"] / bound, result["error"], bound, index))
                tally["learned"] += learned.learned
                if learned.learned:
                    tally["saved"].append(1.0 - result["rollouts"] / default["rollouts"])
            for name, (low, high), value, rule in zip(SLICE_NAMES, SLICES, result["slices"], default["slices"]):
                if value is not None and value > max(0.05, rule or 0.0) + 1e-9:
                    share = float(weights[in_slice(GRID, low, high) & outside].sum())
                    breaks.append((index, "checked" if checked else "unchecked", name, share, value, rule))
    saved = tally["saved"]
    print(
        f"{tally['populations']} random populations with tasks outside the zones, a {pilot}-task pilot each: "
        f"{tally['learned']} learned a table (saving {np.mean(saved) if saved else 0:.1%} of the rule's rollouts "
        f"on average, {max(saved, default=0):.1%} at most); harmed (wrong outside the zones more often than "
        f"max(1%, the rule)): {tally['harmed']} with the check, {tally['harmed unchecked']} without it; closest to "
        f"its bound among the learned tables: population {closest[3]}, {closest[1]:.2%} against {closest[2]:.2%}\n"
    )
    print("| population | table | slice | slice's share of tasks | wrong in the slice | the rule's |")
    print("|---:|---|---|---:|---:|---:|")
    for index, label, name, share, value, rule in breaks:
        print(f"| {index} | {label} | {name} | {share:.3%} | {value:.1%} | {rule:.1%} |")


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
    parser.add_argument("--harmful", action="store_true", help="populations the pilots allow, built to harm")
    parser.add_argument("--random", type=int, default=0, help="this many random populations, one pilot each")
    arguments = parser.parse_args()
    if arguments.mixture:
        TARGETS["mixture"] = True
    if arguments.error_target is not None:
        TARGETS["error_target"] = arguments.error_target
    if arguments.slice_target is not None:
        TARGETS["slice_target"] = arguments.slice_target
    started = time.perf_counter()
    if arguments.random:
        random_populations(arguments.random, arguments.pilot)
        print(f"\nRan in {time.perf_counter() - started:.0f} s")
        return
    if arguments.harmful:
        harmful(arguments.pilot, arguments.seeds)
        print(f"\nRan in {time.perf_counter() - started:.0f} s")
        return
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
