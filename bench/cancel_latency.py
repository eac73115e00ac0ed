"""Cancel benchmark: seconds from cancelling a big campaign to the next campaign's first rollout.

Real Celery workers, an OpenAI-compatible test server (one task per job, as with the in-process
model) and, by default, the embedded setup of `make run`: a SQLite file and the filesystem broker in
a temporary folder. With DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis) set, those instead
(a fresh <name>_cancel database).

    .venv/bin/python bench/cancel_latency.py --tasks 1319
    .venv/bin/python bench/cancel_latency.py --tasks 1319 --jobs-per-campaign 100000   # no window
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1319, help="Tasks of the campaign that is cancelled.")
    parser.add_argument("--jobs-per-campaign", type=int, default=16, help="PASSBAND_JOBS_PER_CAMPAIGN.")
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds the model server takes per request.")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    os.environ.update(
        PASSBAND_TASKS_PER_JOB="1",
        PASSBAND_JOBS_PER_CAMPAIGN=str(args.jobs_per_campaign),
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="passband.settings",
    )
    # The benchmark's own servers listen on 127.0.0.1: allowed as an operator allows a deployment's own (docs/operations.md).
    os.environ.setdefault("PASSBAND_OUTBOUND_ALLOW_HOSTS", "127.0.0.1")
    os.environ.setdefault("SECRET_KEY", "passband-bench-only")
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        from bench.database import fresh_database

        os.environ["DATABASE_URL"] = fresh_database(os.environ["DATABASE_URL"], suffix="_cancel")
        setup = f"PostgreSQL, broker {os.environ.get('CELERY_BROKER_URL', 'filesystem://')}"
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ.pop("CELERY_BROKER_URL", None)
        os.environ["PASSBAND_VAR_DIR"] = tempfile.mkdtemp(prefix="passband-cancel-")
        setup = "SQLite and the filesystem broker (make run)"

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from calibration import services
    from calibration.models import Campaign, Rollout
    from curation.services import environment_create
    from tests.factories import import_tasks
    from tests.support.openai_server import serve_openai
    from tests.support.workers import worker_command

    user = (
        __import__("django.contrib.auth", fromlist=["get_user_model"])
        .get_user_model()
        .objects.create_superuser("bench", "bench@example.invalid", "bench")
    )
    big = environment_create(name="big", domain="text", default_verifier={"kind": "exact"})
    small = environment_create(name="small", domain="text", default_verifier={"kind": "exact"})
    import_tasks(big, user, *[{"key": f"b-{i}", "prompt": f"Say 42 ({i}).", "answer": "42"} for i in range(args.tasks)])
    import_tasks(small, user, *[{"key": f"s-{i}", "prompt": f"Say 42 again ({i}).", "answer": "42"} for i in range(2)])
    command = worker_command(queues="default,generate,verify", concurrency=2, name="bench", loglevel="WARNING")
    with serve_openai(latency_s=args.latency, record_requests=False) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=8
        )
        worker = subprocess.Popen(command, cwd=ROOT, env=os.environ.copy(), start_new_session=True)
        try:
            first = services.campaign_start(
                environment=big, probe_model=model, created_by=user, rollouts=4, round_size=4
            )
            wait(
                lambda: Rollout.objects.filter(campaign=first).exists(),
                args.timeout,
                "the big campaign's first rollout",
            )
            time.sleep(2)  # let it run a little, as a user would before cancelling
            cancelled = time.monotonic()
            services.campaign_set_status(campaign=first, status=Campaign.Status.CANCELLED)
            following = services.campaign_start(
                environment=small, probe_model=model, created_by=user, rollouts=4, round_size=4
            )
            wait(
                lambda: Rollout.objects.filter(campaign=following).exists(),
                args.timeout,
                "the next campaign's first rollout",
            )
            seconds = time.monotonic() - cancelled
            print(
                f"{setup}: {args.tasks} tasks cancelled, window {args.jobs_per_campaign} jobs: "
                f"cancel -> next campaign's first rollout {seconds:.2f} s",
                flush=True,
            )
        finally:
            stop(worker)


def stop(worker: subprocess.Popen) -> None:
    """As scripts/run-local.sh does: a warm shutdown, then a cold one after 10 s; says how long it took."""
    started = time.monotonic()
    worker.send_signal(15)
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.send_signal(3)  # SIGQUIT: cold shutdown (soft: the job in hand gets its few seconds)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, 9)
            worker.wait()
    print(f"worker stopped in {time.monotonic() - started:.1f} s", flush=True)


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.05)


if __name__ == "__main__":
    main()
