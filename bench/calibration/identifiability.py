"""Benchmark: what a pilot cannot tell apart, and what that costs any learner that must stay safe.

    .venv/bin/python bench/calibration/identifiability.py [--pilot 1000] [--divergence 0.1]

Bound B (``simulate.py --frontier``) is the fewest rollouts of a policy that knows the population.
A learner knows only its pilot: it must stay within the limits on every population that pilot
cannot tell from the true one. For each population A of the family this finds an alternative A'
that a pilot of ``--pilot`` tasks (calibrated with the default rule) barely tells from A (the
Kullback-Leibler divergence of the pilot's (passes, attempts) under A and under A', exact, at most
``--divergence`` nats in all) and on which the policy at bound B's prices is wrong most often
(``least_favourable``: A' = A * exp(basis @ g), g by SLSQP over hat functions on the logit scale).
Then:

* **L**: the fewest mean rollouts on A of any policy probing in rounds of 8 up to 256 within the
  limits (<= 1% wrong outside the zones, <= 5% in every slice) under A **and** under A'
  (``two_population_bound``, a Lagrangian lower bound like bound B's);
* **a learner's expected cost**: total variation between the pilots under A and under A' is at most
  sqrt(1 - exp(-divergence)) (Bretagnolle-Huber), so a learner whose table breaks the limits with
  probability at most 5% under each population spends L or more on A with probability at least
  1 - 5% - 5% - that total variation, and at least bound B whenever it is within the limits on A
  (probability 95%): its mean rollouts on A are at least 0.95 B + (1 - 0.1 - TV) (L - B). No
  learner that is safe in that sense does better, whatever its fit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import optimize, special
from scipy import stats as scipy_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate import DEFAULT, GRID, POPULATIONS, THRESHOLDS, outside_zones, population_weights, slice_masks, summarise  # noqa: E402

from engine import stats  # noqa: E402
from engine.stats.sequential import CONTINUE  # noqa: E402


def terminal_distribution(table: stats.StoppingTable, rates: np.ndarray) -> np.ndarray:
    """P(a task stops after round k with s passes | pass rate), shape (len(rates), states), exact."""
    schedule, codes = table.attempts, table.labels
    width = schedule[-1] + 1
    still = np.zeros((rates.size, width))
    still[:, 0] = 1.0
    columns, previous = [], 0
    for attempts, round_codes in zip(schedule, codes):
        new = attempts - previous
        pmf = scipy_stats.binom.pmf(np.arange(new + 1)[None, :], new, rates[:, None])
        reached = still[:, : previous + 1]
        still = np.zeros((rates.size, width))
        for passes in range(new + 1):
            still[:, passes : passes + previous + 1] += reached * pmf[:, passes : passes + 1]
        stopping = np.zeros(width, dtype=bool)
        stopping[: attempts + 1] = np.asarray(round_codes) != CONTINUE
        columns.append(still[:, stopping].copy())
        still[:, stopping] = 0.0
        previous = attempts
    return np.concatenate(columns, axis=1)


def divergence(first: np.ndarray, second: np.ndarray, terminal: np.ndarray) -> float:
    """KL(pilot outcome of one task under ``first`` || under ``second``), populations on GRID."""
    p, q = first @ terminal, second @ terminal
    keep = p > 1e-300
    return float(np.sum(p[keep] * (np.log(p[keep]) - np.log(np.maximum(q[keep], 1e-300)))))


def evaluate(table: stats.StoppingTable, weights: np.ndarray) -> dict:
    curve = stats.operating_characteristic_curve(thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=GRID, table=table)
    return summarise(GRID, weights, np.array(curve.wrong), np.array(curve.expected_attempts))


def two_population_bound(weights: np.ndarray, alternative: np.ndarray | None, iterations: int = 24) -> dict:
    """Least mean rollouts under ``weights`` of any policy within the limits under ``weights`` and
    under ``alternative`` (None: bound B). Weak duality: for any prices, mean rollouts >=
    V - sum(price * limit), V the least rollouts + priced errors of both populations (the
    Bayes-optimal table with per-rate error weights; the alternative's errors enter through the
    likelihood ratio alternative / weights). Prices by multiplicative subgradient steps."""
    outside, masks = outside_zones(GRID), slice_masks()
    populations = [weights] + ([] if alternative is None else [alternative])
    live = [[index for index, mask in enumerate(masks) if population[mask].sum() > 1e-9] for population in populations]
    prices = [(2000.0, {index: 200.0 for index in indices}) for indices in live]
    ratio = [np.ones_like(weights)] + (
        [] if alternative is None else [np.divide(alternative, weights, out=np.zeros_like(weights), where=weights > 0)]
    )
    best = {"bound": 0.0}
    for step in range(iterations):
        penalty = np.zeros_like(weights)
        for population, factor, (error_price, slice_prices) in zip(populations, ratio, prices):
            term = np.where(outside, error_price / population[outside].sum(), 0.0)
            for index, price in slice_prices.items():
                term = term + np.where(masks[index], price / population[masks[index]].sum(), 0.0)
            penalty = penalty + factor * term
        table = stats.bayes_optimal_table(
            thresholds=THRESHOLDS,
            policy=DEFAULT,
            pass_rates=GRID.tolist(),
            weights=weights.tolist(),
            rollout_cost=1.0,
            error_weights=penalty.tolist(),
        )
        results = [evaluate(table, population) for population in populations]
        value = results[0]["rollouts"]
        for result, (error_price, slice_prices) in zip(results, prices):
            value += error_price * (result["error"] - 0.01)
            value += sum(price * (result["slices"][index] - 0.05) for index, price in slice_prices.items())
        if value > best["bound"]:
            best = {
                "bound": value,
                "rollouts": results[0]["rollouts"],
                "errors": [r["error"] for r in results],
                "table": table,
            }
        rate = 0.6 / (1.0 + step / 6.0)
        for which, (result, (error_price, slice_prices)) in enumerate(zip(results, prices)):
            error_price *= float(np.exp(rate * np.clip(result["error"] / 0.01 - 1.0, -1.0, 3.0)))
            slice_prices = {
                index: max(1.0, price * float(np.exp(rate * np.clip(result["slices"][index] / 0.05 - 1.0, -1.0, 3.0))))
                for index, price in slice_prices.items()
            }
            prices[which] = (error_price, slice_prices)
    return best


def least_favourable(
    weights: np.ndarray, wrong: np.ndarray, terminal: np.ndarray, pilot: int, nats: float, knots: int = 50
) -> np.ndarray:
    """The alternative A' = A * exp(basis @ g) (normalised) with the most error outside the zones
    under the pass-rate curve ``wrong``, among those whose pilot divergence from A is at most
    ``nats``: hat functions on the logit scale, one more for the rate 0, g by SLSQP."""
    outside = outside_zones(GRID)
    positive = GRID > 0
    logits = special.logit(np.clip(GRID, 1e-4, 1 - 1e-4))
    centres = np.linspace(logits[positive].min(), logits.max(), knots)
    basis = np.maximum(0.0, 1.0 - np.abs(logits[:, None] - centres[None, :]) / (centres[1] - centres[0]))
    basis[~positive] = 0.0
    basis = np.concatenate([basis, (~positive)[:, None].astype(float)], axis=1)

    def alternative(tilt: np.ndarray) -> np.ndarray:
        tilted = weights * np.exp(basis @ tilt)
        return tilted / tilted.sum()

    def error(population: np.ndarray) -> float:
        return float(population[outside] @ wrong[outside] / population[outside].sum())

    def within_budget(tilt: np.ndarray) -> np.ndarray:
        """The tilt, shrunk (bisection) to the largest share of it whose divergence is in the budget."""
        if pilot * divergence(weights, alternative(tilt), terminal) <= nats:
            return alternative(tilt)
        low, high = 0.0, 1.0
        for _ in range(30):
            middle = (low + high) / 2.0
            if pilot * divergence(weights, alternative(tilt * middle), terminal) <= nats:
                low = middle
            else:
                high = middle
        return alternative(tilt * low)

    first_outcomes = weights @ terminal

    def objective(tilt: np.ndarray) -> tuple[float, np.ndarray]:
        """Minus the error under A'(tilt), and its gradient in the tilt (exact)."""
        population = alternative(tilt)
        errors, mass = population @ (outside * wrong), population @ outside
        mean_basis = population @ basis

        def derivative(values: np.ndarray) -> np.ndarray:
            return basis.T @ (population * values) - mean_basis * (population @ values)

        gradient = (derivative(outside * wrong) * mass - errors * derivative(outside.astype(float))) / mass**2
        return -errors / mass, -gradient

    def budget(tilt: np.ndarray) -> float:
        return nats - pilot * divergence(weights, alternative(tilt), terminal)

    def budget_gradient(tilt: np.ndarray) -> np.ndarray:
        """Of the budget left: pilot * d KL(A || A'(tilt)) / d tilt = -pilot * (B^T (A' * T r) - mean B)."""
        population = alternative(tilt)
        ratio = first_outcomes / np.maximum(population @ terminal, 1e-300)
        pulled = terminal @ ratio
        return pilot * (basis.T @ (population * pulled) - (population @ basis))

    # SLSQP with exact gradients, from three starts: no tilt (where the budget's gradient is 0, so
    # the first step is unconstrained), half the budget along the error's gradient, and half the
    # budget along the curve itself; the worst alternative for the policy is kept.
    def half_budget(direction: np.ndarray) -> np.ndarray:
        low, high = 0.0, 1.0
        while pilot * divergence(weights, alternative(direction * high), terminal) < nats / 2 and high < 1e6:
            high *= 2.0
        for _ in range(30):
            middle = (low + high) / 2.0
            if pilot * divergence(weights, alternative(direction * middle), terminal) < nats / 2:
                low = middle
            else:
                high = middle
        return direction * low

    starts = [
        np.zeros(basis.shape[1]),
        half_budget(-objective(np.zeros(basis.shape[1]))[1]),
        half_budget(np.linalg.lstsq(basis, wrong, rcond=None)[0]),
    ]
    candidates = []
    for start in starts:
        found = optimize.minimize(
            objective,
            start,
            jac=True,
            method="SLSQP",
            constraints=[{"type": "ineq", "fun": budget, "jac": budget_gradient}],
            options={"maxiter": 300},
        )
        candidates.append(within_budget(found.x))
    best = max(candidates, key=error)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pilot", type=int, default=1000, help="tasks in the pilot")
    parser.add_argument("--divergence", type=float, default=0.1, help="the pilot's divergence budget, nats")
    parser.add_argument("--population", action="append", help="a population of simulate.py (default: all)")
    parser.add_argument("--iterations", type=int, default=24)
    arguments = parser.parse_args()
    started = time.perf_counter()
    default = stats.stopping_table(thresholds=THRESHOLDS, policy=DEFAULT)
    terminal = terminal_distribution(default, GRID)
    total_variation = float(np.sqrt(1.0 - np.exp(-arguments.divergence)))
    print(
        f"Pilot of {arguments.pilot} tasks; divergence {arguments.divergence:g} nats, "
        f"so total variation <= {total_variation:.2f}\n"
    )
    print(
        "| population | bound B | A': pilot's divergence (nats) | A': error of bound B's policy | L: within the limits on A "
        "and A' | L / B | a safe learner's mean rollouts, at least | / B |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in arguments.population or list(POPULATIONS):
        weights = population_weights(POPULATIONS[name])
        bound = two_population_bound(weights, None, arguments.iterations)
        wrong = np.array(
            stats.operating_characteristic_curve(
                thresholds=THRESHOLDS, policy=DEFAULT, pass_rates=GRID, table=bound["table"]
            ).wrong
        )
        alternative = least_favourable(weights, wrong, terminal, arguments.pilot, arguments.divergence)
        both = two_population_bound(weights, alternative, arguments.iterations)
        nats = arguments.pilot * divergence(weights, alternative, terminal)
        learner = 0.95 * bound["bound"] + (1.0 - 0.1 - total_variation) * (both["bound"] - bound["bound"])
        print(
            f"| {name} | {bound['bound']:.1f} | {nats:.2f} | {evaluate(bound['table'], alternative)['error']:.2%} "
            f"| {both['bound']:.1f} | {both['bound'] / bound['bound']:.2f}x | {learner:.1f} "
            f"| {learner / bound['bound']:.2f}x |",
            flush=True,
        )
    print(f"\nRan in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
