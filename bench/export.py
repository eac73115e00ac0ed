"""Export benchmark: rows per second streaming N tasks in each trainer format, against PostgreSQL's
own `COPY (<the same query>) TO STDOUT` of the same rows, in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/export.py --tasks 100000

It works in its own database (<name>_bench_export), created afresh each run; the tasks and their
calibrations are generated inside PostgreSQL (generate_series), so the Python process starts small
and its peak memory after each export shows whether the export streamed.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def seed(*, tasks: int) -> tuple:
    """N approved math tasks, one version each, and a calibration under one probe model, all in SQL."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from calibration.models import ProbeModel
    from curation.services import environment_create

    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench")
    environment = environment_create(name="bench", domain="math", default_verifier={"kind": "math"})
    model = ProbeModel.objects.create(name="bench-probe", backend="openai", model="bench")
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO curation_task (environment_id, key, key_order, owner_id, status, created_at, updated_at)
               SELECT %s, 'task-' || i, 'task-' || i, %s, 'approved', now(), now() FROM generate_series(1, %s) AS i""",
            [environment.pk, user.pk, tasks],
        )
        cursor.execute(
            """INSERT INTO curation_taskversion (task_id, number, prompt, answer, verifier, tools, metadata, domain,
                   authoring_cost_usd, content_hash, audit_passed, audit_problems, created_by_id, created_at,
                   gameability_findings, gameable_override_reason)
               SELECT t.id, 1,
                   jsonb_build_array(jsonb_build_object('role', 'user', 'content',
                       'What is ' || t.id || ' + ' || (t.id * 7 %% 1000) || '? Give the final answer on the last line.')),
                   (t.id + t.id * 7 %% 1000)::text, '{"kind": "math"}'::jsonb, '[]'::jsonb,
                   jsonb_build_object('source', 'bench', 'difficulty', t.id %% 5), 'math', 2.50,
                   md5(t.id::text) || md5(t.key), true, '[]'::jsonb, %s, now(), '[]'::jsonb, ''
               FROM curation_task t WHERE t.environment_id = %s""",
            [user.pk, environment.pk],
        )
        cursor.execute(
            """UPDATE curation_task t SET current_version_id = v.id FROM curation_taskversion v WHERE v.task_id = t.id"""
        )
        cursor.execute(
            """INSERT INTO calibration_calibration (task_version_id, probe_model_id, attempts, successes, verifier_errors,
                   generation_errors, pass_rate, interval_low, interval_high, band, decided, grpo_signal, cost_usd,
                   flags, policy, updated_at, diagnosis, diagnosis_evidence, tampered)
               SELECT v.id, %s, 16, v.id %% 17, 0, 0, (v.id %% 17) / 16.0, 0.05, 0.6,
                   CASE WHEN v.id %% 17 = 0 THEN 'too_hard' WHEN v.id %% 17 >= 12 THEN 'retire' ELSE 'in_band' END,
                   true, 0.8, 0.01, '[]'::jsonb, '{}'::jsonb, now(), '', '{}'::jsonb, 0
               FROM curation_taskversion v""",
            [model.pk],
        )
        cursor.execute("ANALYZE")
    return environment, model


def copy_rows_per_second(*, queryset) -> tuple[int, float]:
    """COPY (the export query) TO STDOUT: the same rows, as PostgreSQL's own text output, under the
    same session settings as the export (releases.records.EXPORT_SESSION_SETTINGS)."""
    from django.db import connection, transaction

    from releases.records import EXPORT_SESSION_SETTINGS

    sql, params = queryset.query.sql_with_params()
    connection.ensure_connection()
    raw = connection.connection
    with transaction.atomic(), raw.cursor() as cursor:
        from psycopg import ClientCursor

        for statement in EXPORT_SESSION_SETTINGS:
            cursor.execute(statement)
        literal_sql = ClientCursor(raw).mogrify(sql, params)
        started = time.perf_counter()
        rows = 0
        with cursor.copy(f"COPY ({literal_sql}) TO STDOUT") as copy:
            for block in copy:
                rows += bytes(block).count(b"\n")
        return rows, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--formats", default="native,trl,verifiers,nemo_gym")
    parser.add_argument("--file-types", default="jsonl,parquet")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--card-overhead",
        action="store_true",
        help="only time native JSONL with quality cards against the same export with card building stubbed out",
    )
    args = parser.parse_args()

    django_in_fresh_database(suffix="_bench_export")

    from engine import formats
    from releases import records

    started = time.perf_counter()
    environment, model = seed(tasks=args.tasks)
    print(
        f"seeded {args.tasks} tasks with calibrations in {time.perf_counter() - started:.1f} s; "
        f"peak RSS {peak_rss_mib():.0f} MiB"
    )

    versions = records.export_versions(environment=environment, probe_model=model)
    if args.card_overhead:
        card_overhead(versions=versions, model=model, tasks=args.tasks, repeats=args.repeats)
        return
    # The machine may be shared: each export is paired with a COPY run just before it, and each pair
    # is repeated; the table gives the best of the repeats for both.
    print(f"\n{args.repeats} paired runs each, best of each shown\n")
    print(
        "| format | file | rows | export s | export rows/s | COPY s | COPY rows/s | export / COPY | file MiB | peak RSS MiB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for format in args.formats.split(","):
            for file_type in args.file_types.split(","):
                path = Path(folder) / f"{format}.{file_type}"
                export_times, copy_times = [], []
                for _ in range(args.repeats):
                    copy_rows, copy_seconds = copy_rows_per_second(queryset=versions)
                    assert copy_rows == args.tasks, f"COPY gave {copy_rows} rows, expected {args.tasks}"
                    copy_times.append(copy_seconds)
                    started = time.perf_counter()
                    rows = formats.write_file(
                        records=records.export_records(versions=versions, probe_model=model),
                        format=format,
                        file_type=file_type,
                        path=path,
                    )
                    export_times.append(time.perf_counter() - started)
                    assert rows == args.tasks
                export_seconds, copy_seconds = min(export_times), min(copy_times)
                print(
                    f"| {format} | {file_type} | {rows} | {export_seconds:.2f} | {rows / export_seconds:,.0f} | "
                    f"{copy_seconds:.2f} | {rows / copy_seconds:,.0f} | {copy_seconds / export_seconds:.0%} | "
                    f"{path.stat().st_size / 2**20:.1f} | {peak_rss_mib():.0f} |",
                    flush=True,
                )
                path.unlink()


def card_overhead(*, versions, model, tasks: int, repeats: int) -> None:
    """Native JSONL with each version's quality card (releases/quality_cards.py), against the same export with
    the card selector answering no cards, paired and repeated; best of each."""
    from engine import formats
    from releases import records

    real = records.quality_cards
    times: dict[str, list[float]] = {"with cards": [], "without cards": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(repeats):
            for mode in times:
                records.quality_cards = real if mode == "with cards" else (lambda **kwargs: {})
                started = time.perf_counter()
                rows = formats.write_file(
                    records=records.export_records(versions=versions, probe_model=model),
                    format="native",
                    file_type="jsonl",
                    path=Path(folder) / "native.jsonl",
                )
                times[mode].append(time.perf_counter() - started)
                assert rows == tasks
    records.quality_cards = real
    for mode, seconds in times.items():
        print(f"| native | jsonl | {mode} | {tasks} | {min(seconds):.2f} s | {tasks / min(seconds):,.0f} rows/s |")


if __name__ == "__main__":
    main()
