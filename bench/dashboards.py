"""Dashboard benchmark: p50/p95 latency of every dashboard endpoint over generated data.

Generates 100,000 tasks (five environments) and 5,000,000 rollouts (two probe models, 25
rollouts per task each) in a fresh database with INSERT ... SELECT generate_series (PostgreSQL
writes the rows itself: no Python loop per row), then calls each endpoint through Django's test
client, signed in as a reviewer, and reports p50/p95 over repeated requests.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband \
        .venv/bin/python bench/dashboards.py --tasks 100000 --rollouts-per-task 25 --repeat 30

It works in its own database (<name>_dashbench), created afresh each run (use --reuse to keep
the data of the previous run and only measure).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENVIRONMENTS = ["algebra", "geometry", "python", "sql", "tools"]
DAYS = 90  # calibrations are spread over this many days
ROLLOUT_DAYS = 30  # rollouts are verified over this many days


def bench_database(url: str, *, fresh: bool) -> str:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_dashbench"
    if fresh:
        admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path="/" + name))


def generate(*, tasks: int, rollouts_per_task: int) -> None:
    """Write the data set with set-based SQL. Each task gets a hidden pass rate that drives its band."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from calibration.models import Campaign, ProbeModel
    from curation.services import environment_create

    user_model = get_user_model()
    author = user_model.objects.create_user("author")
    reviewer = user_model.objects.create_user("reviewer")
    from django.contrib.auth.models import Group

    reviewer.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    environments = [
        environment_create(name=name, domain="math", default_verifier={"kind": "math"}) for name in ENVIRONMENTS
    ]
    models = [
        ProbeModel.objects.create(name="small", backend="openai", usd_per_million_output_tokens=0.2),
        ProbeModel.objects.create(name="large", backend="openai", usd_per_million_output_tokens=2.0),
    ]
    campaigns = {
        (environment.pk, model.pk): Campaign.objects.create(
            environment=environment, probe_model=model, created_by=author, seed=1, max_rollouts=rollouts_per_task
        ).pk
        for environment in environments
        for model in models
    }
    environment_ids = "ARRAY[" + ",".join(str(environment.pk) for environment in environments) + "]"
    steps = []
    with connection.cursor() as cursor:

        def run(label: str, sql: str, params=()) -> None:
            started = time.perf_counter()
            cursor.execute(sql, params)
            steps.append((label, time.perf_counter() - started))
            print(f"  {label}: {steps[-1][1]:.1f} s", flush=True)

        run(
            "tasks",
            f"""
            INSERT INTO curation_task (environment_id, key, key_order, owner_id, status, created_at, updated_at)
            -- key_order: engine.natural_sort's form of the key (each number as its length in three digits, then it).
            SELECT ({environment_ids})[1 + mod(i, {len(environments)})], 't-' || i,
                   't-' || lpad(length(i::text)::text, 3, '0') || i, %s,
                   (ARRAY['draft','submitted','in_review','approved','active','rejected'])[1 + mod(i / 7, 6)],
                   now() - mod(i, {DAYS}) * interval '1 day', now() - mod(i, {DAYS}) * interval '1 day'
            FROM generate_series(0, %s - 1) AS i
            """,
            [author.pk, tasks],
        )
        run(
            "task versions",
            """
            INSERT INTO curation_taskversion (task_id, number, prompt, answer, verifier, tools, metadata, domain,
                authoring_cost_usd, content_hash, audit_passed, audit_problems, gameability_findings,
                gameable_override_reason, created_by_id, created_at)
            SELECT t.id, 1, jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'What is ' || t.id || ' + 1?')),
                   (t.id + 1)::text, '{"kind": "math"}', '[]', '{}', 'math', (5 + mod(t.id, 40))::numeric,
                   md5(t.id::text) || md5(t.key), (mod(t.id, 97) <> 0), '[]', '[]', '', t.owner_id, t.created_at
            FROM curation_task t
            """,
        )
        run(
            "current versions",
            "UPDATE curation_task t SET current_version_id = v.id FROM curation_taskversion v WHERE v.task_id = t.id",
        )
        # A hidden pass rate per task version: a spread that puts tasks in every band.
        run(
            "pass rates",
            "CREATE TEMP TABLE truth AS SELECT v.id AS version_id, t.environment_id, "
            "power(mod(v.id * 2654435761::bigint, 1000) / 1000.0, 2.5) AS p FROM curation_taskversion v "
            "JOIN curation_task t ON t.id = v.task_id",
        )
        for model_index, model in enumerate(models):
            case = " ".join(f"WHEN {env} THEN {campaigns[(env, model.pk)]}" for env in [e.pk for e in environments])
            run(
                f"campaign items ({model.name})",
                f"""
                INSERT INTO calibration_campaignitem (campaign_id, task_version_id, round, done, updated_at)
                SELECT CASE truth.environment_id {case} END, truth.version_id, 1, (mod(truth.version_id, 10) <> 0), now()
                FROM truth
                """,
            )
            run(
                f"rollouts ({model.name})",
                f"""
                INSERT INTO calibration_rollout (campaign_id, task_version_id, probe_model_id, sample_index, seed,
                    text, finish_reason, truncated, sampling, generation_error, input_tokens, output_tokens,
                    generation_ms, outcome, reward, detail, verify_ms, cost_usd, created_at, verified_at,
                    capture, logprob_source, prompt_ids_source)
                SELECT CASE draw.environment_id {case} END, draw.version_id, %s, draw.s, draw.s,
                       '', 'stop', false, '{{}}', '', 40, 120, 300 + mod(draw.s * 37, 200),
                       CASE WHEN r < 0.01 THEN 'error' WHEN r < 0.015 THEN 'timeout'
                            WHEN r < 0.015 + draw.p * 0.985 THEN 'pass' ELSE 'fail' END,
                       CASE WHEN r < 0.015 THEN NULL WHEN r < 0.015 + draw.p * 0.985 THEN 1.0 ELSE 0.0 END,
                       '', 2 + 60 * power(latency_draw, 4), %s, at, at, 'text_only', '', ''
                -- random() in a subquery's select list is drawn once per row.
                FROM (SELECT truth.*, s, random() AS r, random() AS latency_draw,
                             now() - random() * interval '{ROLLOUT_DAYS} days' AS at
                      FROM truth CROSS JOIN generate_series(0, %s - 1) AS s) AS draw
                """,
                [model.pk, f"{0.00002 * (1 + 9 * model_index):.8f}", rollouts_per_task],
            )
        run(
            "calibrations",
            """
            INSERT INTO calibration_calibration (task_version_id, probe_model_id, attempts, successes, verifier_errors,
                generation_errors, pass_rate, interval_low, interval_high, band, decided, grpo_signal, cost_usd,
                flags, policy, diagnosis, diagnosis_evidence, updated_at)
            SELECT task_version_id, probe_model_id, attempts, successes, errors, 0,
                   successes::float / nullif(attempts, 0), 0, 1,
                   CASE WHEN errors > 0.3 * (attempts + errors) THEN 'undecided'
                        WHEN successes::float / nullif(attempts, 0) < 0.02 THEN 'too_hard'
                        WHEN successes::float / nullif(attempts, 0) >= 0.7 THEN 'retire' ELSE 'in_band' END,
                   true, 0.5, cost,
                   CASE WHEN errors > 0.3 * (attempts + errors) THEN '["verifier_trouble"]'::jsonb ELSE '[]'::jsonb END,
                   '{}', '', '{}', now() - mod(task_version_id, 90) * interval '1 day'
            FROM (SELECT task_version_id, probe_model_id,
                         count(*) FILTER (WHERE outcome IN ('pass', 'fail')) AS attempts,
                         count(*) FILTER (WHERE outcome = 'pass') AS successes,
                         count(*) FILTER (WHERE outcome IN ('error', 'timeout')) AS errors,
                         sum(cost_usd) AS cost
                  FROM calibration_rollout GROUP BY task_version_id, probe_model_id) AS counts
            """,
        )
    with connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute("VACUUM ANALYZE")
        print(f"  vacuum analyze: {time.perf_counter() - started:.1f} s", flush=True)


def measure(*, repeat: int) -> list[tuple[str, float, float]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="reviewer"))
    endpoints = [
        (
            "pass-rate histogram (one environment, one model)",
            "/dashboard/pass-rates.json?environment=algebra&model=small",
        ),
        ("tasks per band over time (90 days)", "/dashboard/bands-over-time.json?days=90"),
        ("tasks per band over time (one model)", "/dashboard/bands-over-time.json?days=90&model=small"),
        ("cost per task / in-band task, spend by band", "/dashboard/cost.json"),
        ("cost, one model", "/dashboard/cost.json?model=small"),
        ("verifier latency p50/p90/p99 + error rate (24 h)", "/dashboard/verifier-latency.json?hours=24"),
        ("verifier latency, one model (24 h)", "/dashboard/verifier-latency.json?hours=24&model=large"),
        ("campaign progress", "/dashboard/campaigns.json"),
        ("dashboard page (HTML)", "/dashboard/"),
    ]
    results = []
    for label, url in endpoints:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(url)
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        p95 = timings[max(0, round(0.95 * len(timings)) - 1)]
        results.append((label, statistics.median(timings), p95))
        print(f"  {label}: p50 {results[-1][1]:.0f} ms, p95 {p95:.0f} ms", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rollouts-per-task", type=int, default=25, help="Per probe model; two models.")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--reuse", action="store_true", help="Measure the data of the previous run.")
    args = parser.parse_args()

    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("Set DATABASE_URL to a PostgreSQL server (the benchmark creates its own database).")
    os.environ["DATABASE_URL"] = bench_database(os.environ["DATABASE_URL"], fresh=not args.reuse)
    os.environ.setdefault("SECRET_KEY", "passband-bench-only")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    os.environ["DJANGO_SETTINGS_MODULE"] = "passband.settings"
    os.environ["LOG_LEVEL"] = "WARNING"

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if not args.reuse:
        call_command("migrate", verbosity=0)
        print(f"Generating {args.tasks:,} tasks and {2 * args.tasks * args.rollouts_per_task:,} rollouts…", flush=True)
        started = time.perf_counter()
        generate(tasks=args.tasks, rollouts_per_task=args.rollouts_per_task)
        print(f"Generated in {time.perf_counter() - started:.0f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM curation_task")
        task_count = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM calibration_rollout")
        rollout_count = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM calibration_rollout WHERE verified_at >= now() - interval '24 hours'")
        recent = cursor.fetchone()[0]
    print(f"Measuring over {task_count:,} tasks, {rollout_count:,} rollouts ({recent:,} verified in the last 24 h)…")
    results = measure(repeat=args.repeat)
    print()
    print(
        f"| endpoint | p50 ms | p95 ms |  ({task_count:,} tasks, {rollout_count:,} rollouts, {args.repeat} requests each)"
    )
    print("|---|---:|---:|")
    for label, p50, p95 in results:
        print(f"| {label} | {p50:.0f} | {p95:.0f} |")


if __name__ == "__main__":
    main()
