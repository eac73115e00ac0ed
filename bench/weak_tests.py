"""The weak-test check on HumanEval: how many mutants survive real tests and the prompt's example alone, how fast
mutants are graded, and what the check adds to an import's audit.

1. The check (engine/verifiers/mutation.py) on each problem twice: with HumanEval's own tests, and with a test
   made of the first example in the problem's docstring only (problems whose first example is not one
   `>>> call` line and one result line are left out of that half). Prints tasks, mutants graded, mutants a
   second, the mean surviving share and the tasks flagged at several limits.
2. With DATABASE_URL on PostgreSQL (skipped with --no-import): the same problems imported twice into a fresh
   database through the import audit (`curation.imports.tasks_import`), with the check off
   (PASSBAND_WEAK_TESTS_MUTANTS=0) and on (20), and the check's share of the audit's time.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/weak_tests.py [--problems 164]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database  # noqa: E402
from bench.verifiers._common import humaneval_problems, humaneval_verifier  # noqa: E402
from engine.verifiers import mutation  # noqa: E402

LIMITS = (0.3, 0.4, 0.5)
EXAMPLE = re.compile(r">>> *(?P<call>[^\n]+)\n\s*(?P<result>[^\n>]+)\n")


def example_only(problem: dict, verifier: dict) -> dict | None:
    """The verifier with one test: the first docstring example (None when it is not a plain call and result)."""
    found = EXAMPLE.search(problem["prompt"])
    if found is None or not found["call"].startswith(problem["entry_point"] + "("):
        return None
    call = "candidate" + found["call"][len(problem["entry_point"]) :]
    test = f"def check(candidate):\n    assert {call} == {found['result'].strip()}\n"
    try:
        compile(test, "test", "exec")
    except SyntaxError:
        return None
    return {**verifier, "test": test}


def check_all(problems: list[dict]) -> None:
    print(
        "| tests | tasks | mutants graded | mutants/s | mean surviving share | flagged at "
        + " / ".join(map(str, LIMITS))
        + " |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for name in ("HumanEval's own", "the prompt's first example only"):
        results, started = [], time.perf_counter()
        for problem in problems:
            verifier = humaneval_verifier(problem, timeout_seconds=10)
            if name != "HumanEval's own" and (verifier := example_only(problem, verifier)) is None:
                continue
            result = mutation.weak_tests_check(verifier=verifier, answer=problem["canonical_solution"])
            if result is not None and result.mutants:
                results.append(result)
        seconds = time.perf_counter() - started
        graded = sum(result.mutants + result.errors for result in results)
        shares = [result.survived_share or 0.0 for result in results]
        flagged = [
            sum(1 for r in results if r.mutants >= mutation.MIN_MUTANTS and (r.survived_share or 0) > limit)
            for limit in LIMITS
        ]
        print(
            f"| {name} | {len(results)} | {graded} | {graded / seconds:.1f} | "
            f"{sum(shares) / max(len(shares), 1):.3f} | {' / '.join(map(str, flagged))} |"
        )


def import_share(problems: list[dict]) -> None:
    django_in_fresh_database(suffix="_weak_tests")
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from calibration import demo
    from curation import imports, services

    owner = get_user_model().objects.create_superuser("bench", password="bench-only")
    keys = {problem["task_id"].replace("/", "-").lower() for problem in problems}
    rows = [row for row in demo.humaneval_tasks() if row["key"] in keys]
    seconds = {}
    for mutants in (0, mutation.MUTANTS):
        settings.PASSBAND_WEAK_TESTS_MUTANTS = mutants
        environment = services.environment_create(name=f"humaneval-{mutants}", domain="code")
        started = time.perf_counter()
        report = imports.tasks_import(
            environment=environment, owner=owner, filename="humaneval.jsonl", data=demo.as_jsonl(iter(rows))
        )
        seconds[mutants] = time.perf_counter() - started
        assert report.ok, report.problems
        print(
            f"import of {len(rows)} HumanEval tasks with the audits, check {'on' if mutants else 'off'}: "
            f"{seconds[mutants]:.1f} s, {len(report.weak_tests)} flagged for weak tests"
        )
    added = seconds[mutation.MUTANTS] - seconds[0]
    print(f"the check's share of the audit's time: {added / seconds[mutation.MUTANTS]:.0%} ({added:.1f} s added)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=164, help="The first N HumanEval problems (default all).")
    parser.add_argument("--no-import", action="store_true", help="Only the check, no database.")
    options = parser.parse_args()
    problems = humaneval_problems()[: options.problems]
    check_all(problems)
    if not options.no_import:
        import_share(problems)


if __name__ == "__main__":
    main()
