"""Pipeline benchmark: rollouts recorded per second end to end, against a raw COPY of the same rows.

End to end means: Celery (Redis broker) -> generate worker -> an OpenAI-compatible server that
answers instantly -> rows in PostgreSQL -> verify worker -> verdicts and calibrations. The baseline
is PostgreSQL's own bulk load (COPY ... FROM STDIN) of the very rows the run produced.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \
        .venv/bin/python bench/pipeline.py --tasks 2000 --rollouts 16 --tasks-per-job 32 --samples-per-request 16

It works in its own database (<name>_bench), created afresh each run.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database, exact_match_environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rollouts", type=int, default=16, help="Rollouts per task.")
    parser.add_argument("--round-size", type=int, default=0, help="Rollouts per round (default: all in one round).")
    parser.add_argument("--tasks-per-job", type=int, default=32, help="Task versions per generate/verify job.")
    parser.add_argument("--timeout", type=float, default=900, help="Give up after this many seconds.")
    parser.add_argument("--concurrency", type=int, default=2, help="Prefork processes of the worker.")
    parser.add_argument(
        "--samples-per-request", type=int, default=16,
        help="Consecutive seeds per request (n), as with vLLM; 1 sends one request per rollout.",
    )
    args = parser.parse_args()

    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
    os.environ["PASSBAND_TASKS_PER_JOB"] = str(args.tasks_per_job)  # read by this process and the worker
    round_size = args.round_size or args.rollouts
    django_in_fresh_database(suffix="_bench")
    import redis
    from django.conf import settings
    from django.db import connection

    from calibration import services
    from calibration.models import Campaign, Rollout
    from tests.support.openai_server import OpenAITestServer

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    user, environment = exact_match_environment(tasks=args.tasks)

    server = OpenAITestServer(record_requests=False, eos_probability=0.3).start()
    model = services.probe_model_add(
        name="instant", backend="openai", base_url=server.base_url, model="fake-model", max_new_tokens=32,
        usd_per_million_input_tokens=0.1, usd_per_million_output_tokens=0.4,
        samples_per_request=args.samples_per_request,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "passband", "worker", "-Q", "default,generate,verify",
         "--concurrency", str(args.concurrency), "--without-heartbeat", "--without-gossip", "--without-mingle",
         "--loglevel", "WARNING"],
        cwd=ROOT, env=os.environ.copy(),
    )
    try:
        time.sleep(6)  # let the worker start and connect; startup is not what is measured
        started = time.perf_counter()
        campaign = services.campaign_start(
            environment=environment, probe_model=model, created_by=user, rollouts=args.rollouts,
            round_size=round_size, seed=1,
        )
        while Campaign.objects.get(pk=campaign.pk).status != Campaign.Status.DONE:
            if time.perf_counter() - started > args.timeout:
                sys.exit(f"the campaign did not finish within {args.timeout:.0f} s")
            time.sleep(0.1)
        elapsed = time.perf_counter() - started
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        server.stop()
    recorded = Rollout.objects.filter(campaign=campaign, outcome__isnull=False).count()

    # Baseline: bulk-load the same rows with COPY into an empty copy of the table.
    with connection.cursor() as cursor:
        raw = cursor.connection
        buffer = io.BytesIO()
        with raw.cursor().copy("COPY calibration_rollout TO STDOUT (FORMAT binary)") as copy:
            for chunk in copy:
                buffer.write(chunk)
        raw.execute("CREATE TABLE rollout_copy (LIKE calibration_rollout INCLUDING ALL)")
        copy_started = time.perf_counter()
        with raw.cursor().copy("COPY rollout_copy FROM STDIN (FORMAT binary)") as copy:
            copy.write(buffer.getvalue())
        raw.commit()
        copy_elapsed = time.perf_counter() - copy_started

    pipeline_rate, copy_rate = recorded / elapsed, recorded / copy_elapsed
    print("| tasks × rollouts (round) | tasks per job | samples per request | worker processes | pipeline rollouts/s | COPY rows/s | pipeline / COPY |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {args.tasks} × {args.rollouts} ({round_size}) = {recorded:,} | {args.tasks_per_job} | {args.samples_per_request} | {args.concurrency} "
        f"| {pipeline_rate:,.0f} | {copy_rate:,.0f} | {pipeline_rate / copy_rate:.1%} |"
    )


if __name__ == "__main__":
    main()
