"""A bounded load test of the pages and the API while a campaign runs, on loopback only.

Sets up a fresh database (<name>_load): an environment of `--tasks` tasks, calibrated by a first
campaign through a real Celery worker and the replaying vLLM-shaped server (bench/fake_vllm.py),
approved, and a built release. Then it starts gunicorn on 127.0.0.1, starts a second campaign
(`--campaign-rollouts` per task) for the worker to run meanwhile, and runs locust headless for
`--duration` seconds with `--users` users (4 trainers to 1 reviewer): trainers page through
/api/v1/tasks, post feedback and download the release; reviewers read the task list, the dashboard
and the review queue. Prints p50/p95 and failures per request and the campaign's rollouts/s.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \\
        .venv/bin/python bench/loadtest/run.py --users 50 --duration 60 --locust /path/to/locust

locust comes from the `load` extra (`pip install -e '.[load]'`, best in a virtualenv of its own).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database, exact_match_environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--spawn-rate", type=float, default=10)
    parser.add_argument("--duration", type=int, default=60, help="Seconds of load.")
    parser.add_argument(
        "--campaign-rollouts",
        type=int,
        default=512,
        help="Rollouts per task of the campaign that runs meanwhile (0: none, the baseline); enough to outlast the "
        "load.",
    )
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn worker processes (docker-compose runs 3).")
    parser.add_argument(
        "--worker-nice", type=int, default=10, help="The Celery worker's niceness (PASSBAND_WORKER_NICE; compose: 10)."
    )
    parser.add_argument(
        "--api-page-seconds",
        type=int,
        default=5,
        help="PASSBAND_API_PAGE_SECONDS: API task pages served again to the same user and URL (compose: 5; 0: none).",
    )
    parser.add_argument("--reuse", action="store_true", help="Run on the database and files of an earlier run.")
    parser.add_argument(
        "--warm-up",
        type=int,
        default=0,
        help="Seconds of load before counting starts (added to --duration): the reviewers' sign-ins (password "
        "hashing, about 0.5 s of CPU each) and the web processes' first requests are left out.",
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--locust", default="locust", help="The locust executable.")
    parser.add_argument("--out", default="", help="Folder for locust's CSV files (default: a temporary one).")
    args = parser.parse_args()

    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
    base, number = os.environ["CELERY_BROKER_URL"].rsplit("/", 1)
    # Sessions and rate limits in Redis, as docker-compose runs the app: the database after the broker's.
    os.environ.setdefault("CACHE_URL", f"{base}/{(int(number or 0) + 1) % 16}")
    # Release files live beside the database they belong to, so that --reuse finds them.
    var = ROOT / "var" / "loadtest"
    os.environ["PASSBAND_VAR_DIR"] = str(var)
    if not args.reuse:
        shutil.rmtree(var, ignore_errors=True)
    django_in_fresh_database(suffix="_load", reuse=args.reuse)

    import redis
    from django.conf import settings

    from bench.fake_vllm import PooledVLLMServer
    from calibration import services
    from calibration.models import Campaign, Rollout
    from tests.support.workers import worker_command

    for url in (settings.CELERY_BROKER_URL, settings.CACHES["default"]["LOCATION"]):
        redis.Redis.from_url(url).flushdb()
    server = PooledVLLMServer(max_tokens=1024).start()
    env = {**os.environ, "PASSBAND_WORKER_NICE": str(args.worker_nice)}
    worker = subprocess.Popen(
        worker_command(queues="default,generate,verify", concurrency=2, name="bench", loglevel="WARNING"),
        cwd=ROOT,
        env=env,
    )
    web = None
    try:
        setup = (
            _existing_setup(tokens=args.users)
            if args.reuse
            else _fresh_setup(tasks=args.tasks, base_url=server.base_url, tokens=args.users)
        )
        web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "passband.wsgi", "--bind", f"127.0.0.1:{args.port}"]
            + ["--workers", str(args.web_workers), "--log-level", "warning"],
            cwd=ROOT,
            env={
                **os.environ,
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
                "SECURE_COOKIES": "false",
                "PASSBAND_API_PAGE_SECONDS": str(args.api_page_seconds),
            },
        )
        _wait_serving(f"http://127.0.0.1:{args.port}/healthz", timeout=120)
        running = None
        if args.campaign_rollouts:
            probe = services.probe_model_add(
                name=f"probe-{time.strftime('%H%M%S')}",
                backend="openai",
                base_url=server.base_url,
                model="fake-model",
                max_new_tokens=1024,
                samples_per_request=16,
            )
            running = services.campaign_start(
                environment=setup["environment"],
                probe_model=probe,
                created_by=setup["user"],
                rollouts=args.campaign_rollouts,
                round_size=16,
                seed=2,
            )
        out = Path(args.out or tempfile.mkdtemp(prefix="passband-load-"))
        out.mkdir(parents=True, exist_ok=True)
        load_before = os.getloadavg()
        started = time.perf_counter()
        subprocess.run(
            [args.locust, "-f", str(Path(__file__).with_name("locustfile.py")), "--headless"]
            + ["--users", str(args.users), "--spawn-rate", str(args.spawn_rate)]
            + ["--run-time", f"{args.duration + args.warm_up}s"]
            + ["--host", f"http://127.0.0.1:{args.port}", "--csv", str(out / "load"), "--only-summary"]
            + ["--loglevel", "WARNING"],
            env={
                **os.environ,
                "PASSBAND_LOAD_TOKENS": ",".join(setup["tokens"]),
                "PASSBAND_LOAD_ENVIRONMENT": setup["environment"].name,
                "PASSBAND_LOAD_RELEASE": str(setup["release"].pk),
                "PASSBAND_LOAD_TASKS": ",".join(setup["keys"]),
                "PASSBAND_LOAD_REVIEWER": "reviewer:reviewer",
                "PASSBAND_LOAD_WARM_UP": str(args.warm_up),
            },
            check=False,
        )
        elapsed = time.perf_counter() - started
        load_after = os.getloadavg()
        during = Rollout.objects.filter(campaign=running, outcome__isnull=False).count() if running else 0
        still_running = running is not None and Campaign.objects.get(pk=running.pk).status == Campaign.Status.RUNNING
        if still_running:
            services.campaign_set_status(campaign=running, status=Campaign.Status.CANCELLED)
    finally:
        for process in (web, worker):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)
        server.stop()

    print(f"machine load (1-minute average, 2 cores): {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    if args.campaign_rollouts:
        print(
            f"campaign meanwhile: {during:,} rollouts verified in {elapsed:.0f} s = {during / elapsed:,.0f} rollouts/s, "
            + ("still running at the end" if still_running else "FINISHED before the end: raise --campaign-rollouts")
        )
    print("| request | requests | failures | p50 ms | p95 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    with open(out / "load_stats.csv") as stats:
        for row in csv.DictReader(stats):
            if row["Request Count"] == "0":
                continue
            print(
                f"| {row['Type']} {row['Name']} | {row['Request Count']} | {row['Failure Count']} | {row['50%']} | {row['95%']} | {float(row['Max Response Time']):.0f} |"
            )
    print(f"locust's CSV files: {out}")


def _fresh_setup(*, tasks: int, base_url: str, tokens: int) -> dict:
    """The environment, calibrated by a first campaign through the worker, approved and released."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from calibration import services
    from calibration.models import Campaign
    from curation.models import Task, TaskStatus
    from releases.models import Release, ReleaseStatus
    from releases.services import release_create

    user, environment = exact_match_environment(tasks=tasks, verifier={"kind": "exact", "extract": "last_line"})
    for name, group in (("trainer", "trainers"), ("reviewer", "reviewers")):
        get_user_model().objects.create_user(name, password=name).groups.add(Group.objects.get_or_create(name=group)[0])
    first = services.probe_model_add(
        name="probe",
        backend="openai",
        base_url=base_url,
        model="fake-model",
        max_new_tokens=1024,
        samples_per_request=16,
    )
    campaign = services.campaign_start(
        environment=environment, probe_model=first, created_by=user, rollouts=16, round_size=16, seed=1
    )
    _wait_done(Campaign, campaign.pk, timeout=600)
    Task.objects.filter(environment=environment).update(status=TaskStatus.APPROVED)
    release = release_create(user=user, probe_model=first, environment=environment, band="")  # the worker builds it
    started = time.perf_counter()
    while Release.objects.get(pk=release.pk).status != ReleaseStatus.READY:
        if time.perf_counter() - started > 120:
            sys.exit(f"release {release.pk} was not built within 120 s")
        time.sleep(0.5)
    return _existing_setup(tokens=tokens)


def _existing_setup(*, tokens: int) -> dict:
    """The environment, a built release and `tokens` API tokens of the trainer, one per trainer script (a
    token's rate limit, PASSBAND_API_RATE, is per script; the trainers are one user, so they share kept
    pages)."""
    from django.contrib.auth import get_user_model

    from accounts.services import api_token_create
    from curation.models import Environment, Task
    from releases.models import Release, ReleaseStatus

    environment = Environment.objects.get(name="bench")
    release = Release.objects.filter(status=ReleaseStatus.READY).order_by("pk").first()
    if release is None:
        sys.exit("no release from an earlier run: run once without --reuse")
    trainer = get_user_model().objects.get(username="trainer")
    secrets = [
        api_token_create(user=trainer, name=f"load-{index}", scopes=["read", "feedback", "export"])[1]
        for index in range(tokens)
    ]
    return {
        "environment": environment,
        "user": get_user_model().objects.filter(is_superuser=True).first(),
        "release": release,
        "tokens": secrets,
        "keys": list(Task.objects.filter(environment=environment).values_list("key", flat=True)[:200]),
    }


def _wait_serving(url: str, *, timeout: float) -> None:
    import urllib.request

    started = time.perf_counter()
    while True:
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except OSError:
            if time.perf_counter() - started > timeout:
                sys.exit(f"the web app did not answer {url} within {timeout:.0f} s")
            time.sleep(0.5)


def _wait_done(model, pk: int, *, timeout: float) -> None:
    started = time.perf_counter()
    while model.objects.get(pk=pk).status != model.Status.DONE:
        if time.perf_counter() - started > timeout:
            sys.exit(f"the first campaign did not finish within {timeout:.0f} s")
        time.sleep(0.5)


if __name__ == "__main__":
    main()
