"""Real size: 100,000 tasks and 1,000,000 rollouts in PostgreSQL, then the pages, the API, the export
and the migrations on that data.

The data is bench/dashboards.py's (five environments of 20,000 tasks, two probe models, every status,
every band, rollouts spread over 30 days), written by PostgreSQL itself with generate_series. Then:

* pages and API, one user at a time through Django's test client (p50/p95 of `--repeat` requests, each
  task page a different task): the dashboard, the task list (first page and page 100), the review
  queue, task pages, GET /api/v1/tasks (first page and a later cursor page), the campaigns JSON;
* the export: `manage.py export` of one environment (20,000 tasks) as native JSONL and TRL Parquet;
* migrations: each app's last migrations undone and applied again on this data (the forward time is
  what an upgrade costs), e.g. calibration back to 0008 and forward to the latest.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband \\
        .venv/bin/python bench/real_size.py --tasks 100000 --rollouts-per-task 5

Its own database (<name>_realsize), made afresh each run; --reuse measures the data of the last run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (app, the migration to go back to): everything after it is undone, then applied again. These span the
# migrations that rewrite big tables: the rollouts index on verified_at (1M rows), key_order (every task).
MIGRATIONS_BACK = [
    ("calibration", "0003_episode"),
    ("curation", "0008_import_mapping"),
    ("releases", "0001_initial"),
]


def timed(label: str, function, *args, **kwargs) -> float:
    started = time.perf_counter()
    function(*args, **kwargs)
    elapsed = time.perf_counter() - started
    print(f"  {label}: {elapsed:.1f} s", flush=True)
    return elapsed


def pages(*, repeat: int) -> list[tuple[str, float, float, int]]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from accounts.services import api_token_create
    from curation.models import Task

    users = get_user_model().objects
    trainer, _ = users.get_or_create(username="trainer")
    trainer.groups.add(Group.objects.get_or_create(name="trainers")[0])
    _, token = api_token_create(user=trainer, name="bench", scopes=["read"])
    browser = Client()
    browser.force_login(users.get(username="reviewer"))
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    keys = list(Task.objects.filter(environment__name="algebra").values_list("key", flat=True)[:5000])
    rng = random.Random(1)
    later_cursor = api.get("/api/v1/tasks?environment=algebra&model=small").json()["next"]
    for _ in range(20):  # twenty pages on
        later_cursor = api.get(later_cursor).json()["next"]
    endpoints = [
        ("dashboard", browser, lambda: "/dashboard/"),
        ("task list, first page", browser, lambda: "/tasks/?environment=algebra&model=small"),
        ("task list, page 100", browser, lambda: "/tasks/?environment=algebra&model=small&page=100"),
        ("task list, in band, by pass rate", browser, lambda: "/tasks/?model=small&band=in_band&sort=-pass_rate"),
        ("review queue", browser, lambda: "/review/"),
        ("task page", browser, lambda: f"/tasks/algebra/{rng.choice(keys)}/"),
        ("campaigns JSON", browser, lambda: "/dashboard/campaigns.json"),
        ("API tasks, first page (100)", api, lambda: "/api/v1/tasks?environment=algebra&model=small"),
        ("API tasks, 21st page", api, lambda: later_cursor),
    ]
    results = []
    for label, client, url in endpoints:
        first = client.get(url())
        assert first.status_code == 200, (label, first.status_code)
        timings = []
        with CaptureQueriesContext(connection) as queries:
            for _ in range(repeat):
                started = time.perf_counter()
                client.get(url())
                timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        p95 = timings[max(0, round(0.95 * len(timings)) - 1)]
        results.append((label, statistics.median(timings), p95, round(len(queries.captured_queries) / repeat)))
        print(f"  {label}: p50 {results[-1][1]:.0f} ms, p95 {p95:.0f} ms, {results[-1][3]} queries", flush=True)
    return results


def exports() -> list[tuple[str, float, int]]:
    from django.core.management import call_command

    results = []
    with tempfile.TemporaryDirectory(prefix="passband-realsize-") as folder:
        for file_format, suffix in (("native", "jsonl"), ("trl", "parquet")):
            out = Path(folder) / f"algebra-{file_format}.{suffix}"
            elapsed = timed(
                f"export algebra as {file_format} .{suffix}",
                call_command,
                "export",
                environment="algebra",
                model="small",
                format=file_format,
                output=out,
                verbosity=0,
            )
            results.append((f"{file_format} .{suffix}", elapsed, out.stat().st_size))
    return results


def migrations() -> list[tuple[str, float, float]]:
    """Undo each app's later migrations (others that depend on them go back too), then `migrate` forward."""
    from django.core.management import call_command
    from django.db.migrations.recorder import MigrationRecorder

    applied = set(MigrationRecorder.Migration.objects.values_list("app", "name"))
    undo = sum(
        timed(f"{app}: back to {target}", call_command, "migrate", app, target, verbosity=0)
        for app, target in MIGRATIONS_BACK
    )
    undone = sorted(applied - set(MigrationRecorder.Migration.objects.values_list("app", "name")))
    forward = timed(f"migrate: {len(undone)} migrations applied again", call_command, "migrate", verbosity=0)
    return [(", ".join(f"{app} {name.split('_')[0]}" for app, name in undone), undo, forward)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rollouts-per-task", type=int, default=5, help="Per probe model; two models.")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--reuse", action="store_true", help="Measure the data of the previous run.")
    parser.add_argument(
        "--parts",
        default="pages,export,migrations",
        help="What to measure, comma-separated: pages, export, migrations.",
    )
    args = parser.parse_args()

    from bench.dashboards import generate
    from bench.database import django_in_fresh_database

    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    django_in_fresh_database(suffix="_realsize", reuse=args.reuse)
    from django.db import connection

    if not args.reuse:
        rollouts = 2 * args.tasks * args.rollouts_per_task
        print(f"Generating {args.tasks:,} tasks and {rollouts:,} rollouts…", flush=True)
        timed("generated", generate, tasks=args.tasks, rollouts_per_task=args.rollouts_per_task)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM curation_task")
        task_count = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM calibration_rollout")
        rollout_count = cursor.fetchone()[0]
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        size = cursor.fetchone()[0]
    print(f"Measuring over {task_count:,} tasks, {rollout_count:,} rollouts ({size}); load {os.getloadavg()[0]:.1f}")
    parts = set(args.parts.split(","))
    page_rows = pages(repeat=args.repeat) if "pages" in parts else []
    export_rows = exports() if "export" in parts else []
    migration_rows = migrations() if "migrations" in parts else []
    print(f"\n{task_count:,} tasks, {rollout_count:,} rollouts, database {size}; load {os.getloadavg()[0]:.1f}\n")
    if page_rows:
        print("| page or call | p50 ms | p95 ms | queries |")
        print("|---|---:|---:|---:|")
        for label, p50, p95, queries in page_rows:
            print(f"| {label} | {p50:.0f} | {p95:.0f} | {queries} |")
    if export_rows:
        print("\n| export of one environment (20,000 tasks) | seconds | MB |")
        print("|---|---:|---:|")
        for label, elapsed, size_bytes in export_rows:
            print(f"| {label} | {elapsed:.1f} | {size_bytes / 1e6:.1f} |")
    if migration_rows:
        print("\n| migrations undone, then applied again | undo s | apply s |")
        print("|---|---:|---:|")
        for label, back, forward in migration_rows:
            print(f"| {label} | {back:.1f} | {forward:.1f} |")


if __name__ == "__main__":
    main()
