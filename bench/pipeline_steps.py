"""The pipeline's steps in one process, without a broker: rollouts per second and queries per task.

Runs what the workers run (`round_run`: round_generate, then round_score) over a
campaign of one round, `--tasks-per-job` task versions per step, against the OpenAI-compatible test
server in a thread of this process. It isolates the database and Python cost of a round from Celery.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband \
        .venv/bin/python bench/pipeline_steps.py --tasks 480 --tasks-per-job 1 32

"queries per task" counts the queries made through Django; the rollout insert (one per job) runs on a
psycopg cursor of its own and is not in it. It works in its own database (<name>_steps), created
afresh each run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database, exact_match_environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=480)
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--tasks-per-job", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--samples-per-request", type=int, default=16)
    parser.add_argument("--lengths", choices=["realistic", "short"], default="realistic", help="Completion lengths.")
    parser.add_argument("--profile", default="", help="Write a cProfile of the rounds to this file (pstats).")
    args = parser.parse_args()
    max_new_tokens = 1024 if args.lengths == "realistic" else 32

    django_in_fresh_database(suffix="_steps")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.fake_vllm import PooledVLLMServer
    from calibration import services
    from calibration.models import CampaignItem
    from tests.support.openai_server import OpenAITestServer

    verifier = {"kind": "exact", "extract": "last_line"} if args.lengths == "realistic" else {"kind": "exact"}
    user, environment = exact_match_environment(tasks=args.tasks, verifier=verifier)
    if args.lengths == "realistic":
        server = PooledVLLMServer(max_tokens=max_new_tokens).start()
    else:
        server = OpenAITestServer(record_requests=False, eos_probability=0.3).start()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    print(
        "| tasks × rollouts | tasks per job | samples per request | queries per task | rollouts/s (one process) | CPU ms per rollout (this process, server included) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    try:
        for size in args.tasks_per_job:
            model = services.probe_model_add(
                name=f"instant-{size}",
                backend="openai",
                base_url=server.base_url,
                model="fake-model",
                max_new_tokens=max_new_tokens,
                samples_per_request=args.samples_per_request,
            )
            campaign = services.campaign_start(
                environment=environment,
                probe_model=model,
                created_by=user,
                rollouts=args.rollouts,
                round_size=args.rollouts,
                seed=1,
                enqueue=False,
            )
            ids = list(
                CampaignItem.objects.filter(campaign=campaign)
                .order_by("task_version_id")
                .values_list("task_version_id", flat=True)
            )
            jobs = [ids[start : start + size] for start in range(0, len(ids), size)]
            started = time.perf_counter()
            cpu_started = time.process_time()
            if profiler:
                profiler.enable()
            with CaptureQueriesContext(connection) as queries:
                for job in jobs:
                    services.round_run(campaign_id=campaign.pk, task_version_ids=job, round_index=0)
            if profiler:
                profiler.disable()
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            print(
                f"| {len(ids)} × {args.rollouts} | {size} | {args.samples_per_request} "
                f"| {len(queries.captured_queries) / len(ids):.2f} | {len(ids) * args.rollouts / elapsed:,.0f} "
                f"| {cpu * 1000 / (len(ids) * args.rollouts):.3f} |"
            )
    finally:
        server.stop()
    if profiler:
        profiler.dump_stats(args.profile)


if __name__ == "__main__":
    main()
