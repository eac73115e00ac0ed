"""The gameability audit on the demo sets: how many sound tasks it flags, and what it costs.

Imports the demo's 60 arithmetic tasks (math verifier) and HumanEval's 164 problems (code verifier)
into a fresh database, then runs `manage.py verifier_test`'s check over each environment: every
task's verifier against the standard battery of degenerate completions. Reports the tasks flagged
with what paid, and the time per task of the battery against the reference-answer audit alone
(`engine.verifiers.audit`) in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/gameability.py

Goal: no false flags (a flag on these sets must be a real weakness of the task's tests).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database  # noqa: E402


def main() -> None:
    django_in_fresh_database(suffix="_gameability")
    from django.contrib.auth import get_user_model

    from calibration import demo
    from curation import gameability, imports, services
    from engine import verifiers

    owner = get_user_model().objects.create_superuser("bench", password="bench-only")
    sets = {
        "arithmetic": (demo.arithmetic_tasks(), "math"),
        "humaneval": (demo.humaneval_tasks(), "code"),
    }
    print("| set | tasks | flagged | battery s/task | reference audit s/task | flagged tasks (what paid) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, (tasks, domain) in sets.items():
        rows = list(tasks)
        environment = services.environment_create(name=name, domain=domain)
        report = imports.tasks_import(
            environment=environment,
            owner=owner,
            filename=f"{name}.jsonl",
            data=demo.as_jsonl(iter(rows)),
            run_audits=False,
        )
        assert report.ok, report.problems
        started = time.perf_counter()
        for row in rows:
            verifiers.audit(verifier=row["verifier"], answer=row["answer"], prompt=row["prompt"])
        audit_s = (time.perf_counter() - started) / len(rows)
        started = time.perf_counter()
        checked = gameability.environment_gameability_check(environment=environment)
        battery_s = (time.perf_counter() - started) / max(checked.checked, 1)
        flagged = "; ".join(
            f"{item['task']} ({', '.join(finding['label'] for finding in item['findings'])})"
            for item in checked.gameable
        )
        print(
            f"| {name} | {checked.checked} | {len(checked.gameable)} | {battery_s:.3f} | {audit_s:.3f} | "
            f"{flagged or '—'} |"
        )


if __name__ == "__main__":
    main()
