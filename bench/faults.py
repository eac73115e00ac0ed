"""Faults during a running campaign, on private PostgreSQL and Redis instances (never the suite's shared ones).

Each scenario starts a campaign (exact-answer tasks, the scripted OpenAI-compatible test server as the model),
lets a real Celery worker (with beat inside it) store about a quarter of the rollouts, then breaks something:

* `redis`: the broker killed with SIGKILL and started again empty on the same port (it keeps nothing on disk,
  so every queued message is lost);
* `postgres`: the database stopped in immediate mode (no clean shutdown, connections cut) and started again;
* `worker`: the worker's whole process group killed with SIGKILL in the middle of batched rounds, and a new
  worker started.

It then waits for the campaign to finish, starting a worker again whenever one exits (as compose's restart
policy does: a worker may die of the fault itself), and checks that every sample is stored exactly once and that the
calibrations count every attempt once; it reports how long the campaign took to finish after the fault ended,
the rounds beat had to queue again (the campaign page's note) and the counters on /metrics.

    .venv/bin/python bench/faults.py --tasks 40 --rollouts 8 --down 5

Needs PostgreSQL's server binaries (initdb, postgres, pg_ctl; Debian's postgresql package) and redis-server.
Run as root, it runs PostgreSQL as the `postgres` user. Results: docs/operations.md ("Faults").
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_port(port: int, *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class PrivateRedis:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class PrivatePostgres:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.data = folder / "data"
        self.sockets = folder / "sockets"
        self.bin = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.process: subprocess.Popen | None = None

    def init(self) -> None:
        self.data.mkdir(parents=True)
        self.sockets.mkdir(parents=True)
        if self.as_postgres:
            shutil.chown(self.data.parent, "postgres")
            for folder in (self.data, self.sockets):
                shutil.chown(folder, "postgres")
        subprocess.run(
            [
                *self.as_postgres,
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *self.as_postgres,
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={self.sockets}",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=100",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port)

    def stop_immediately(self) -> None:
        subprocess.run(
            [*self.as_postgres, str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        if self.process is not None:
            self.process.wait()

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"


def worker(env: dict, log: Path, name: str) -> subprocess.Popen:
    from tests.support.workers import worker_command

    return subprocess.Popen(
        worker_command(
            queues="default,generate,verify", concurrency=2, name=name, beat_schedule=log.with_suffix(".beat")
        ),
        cwd=ROOT,
        env=env,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop(process: subprocess.Popen, *, hard: bool = False) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL if hard else signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def patiently(read, *, what: str, timeout: float, until):
    """Poll `read()` until `until(value)`, riding out the database being away (connections are reopened)."""
    from django.db import connection
    from django.db.utils import Error as DatabaseError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = read()
            if until(value):
                return value
        except DatabaseError:
            connection.close()
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def scenario(fault: str, *, services, env: dict, folder: Path, tasks: int, rollouts: int, down_s: float, setup) -> dict:
    from django.db.models import Count

    from calibration import services as calibration
    from calibration.models import Calibration, Campaign, Rollout

    environment, owner, model = setup
    campaign = calibration.campaign_start(
        environment=environment, probe_model=model, created_by=owner, rollouts=rollouts, round_size=2, seed=7
    )
    total = tasks * rollouts
    running = worker(env, folder / f"{fault}-worker.log", f"{fault}-first")
    started = time.monotonic()
    patiently(
        lambda: Rollout.objects.filter(campaign=campaign).count(),
        what="a quarter of the rollouts",
        timeout=300,
        until=lambda n: n >= total // 4,
    )
    fault_at = time.monotonic()
    if fault == "redis":
        services["redis"].kill()
        time.sleep(down_s)
        services["redis"].start()
    elif fault == "postgres":
        services["postgres"].stop_immediately()
        time.sleep(down_s)
        services["postgres"].start()
    elif fault == "worker":
        stop(running, hard=True)
        time.sleep(down_s)
        running = worker(env, folder / f"{fault}-worker-2.log", f"{fault}-second")
    recovered_at = time.monotonic()
    # A supervisor, as compose's `restart: unless-stopped` is: a worker that exited is started again.
    restarts = 0

    def status():
        nonlocal running, restarts
        if running.poll() is not None:
            restarts += 1
            running = worker(env, folder / f"{fault}-worker-restart-{restarts}.log", f"{fault}-restart-{restarts}")
        return Campaign.objects.get(pk=campaign.pk).status

    try:
        patiently(
            status,
            what=f"the campaign to finish after the {fault} fault",
            timeout=900,
            until=lambda value: value == Campaign.Status.DONE,
        )
    finally:
        stop(running)
    done_at = time.monotonic()
    per_sample = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version", "sample_index")
        .annotate(n=Count("id"))
        .values_list("n", flat=True)
    )
    calibrations = Calibration.objects.filter(probe_model=model, task_version__task__environment=environment)
    counted = sum(c.attempts + c.verifier_errors + c.generation_errors for c in calibrations)
    campaign.refresh_from_db()
    return {
        "fault": fault,
        "stored": len(per_sample),
        "expected": total,
        "duplicates": sum(1 for n in per_sample if n > 1),
        "calibration_attempts": counted,
        "stalled_rounds": campaign.stalled_rounds,
        "worker_restarts": restarts,
        "before_fault_s": fault_at - started,
        "down_s": recovered_at - fault_at,
        "finish_after_recovery_s": done_at - recovered_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--down", type=float, default=5.0, help="Seconds each service stays down.")
    parser.add_argument("--faults", nargs="+", default=["redis", "postgres", "worker"])
    arguments = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="passband-faults-"))
    folder.chmod(0o755)  # the postgres user must reach its data folder inside
    redis_server, postgres = PrivateRedis(folder), PrivatePostgres(folder / "pg")
    postgres.init()
    postgres.start()
    redis_server.start()
    try:
        import psycopg

        with psycopg.connect(postgres.url("postgres"), autocommit=True) as connection:
            connection.execute("CREATE DATABASE passband")
        metrics = folder / "metrics"
        metrics.mkdir()
        env = {
            **os.environ,
            "DATABASE_URL": postgres.url("passband"),
            "CELERY_BROKER_URL": redis_server.url,
            "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-faults"),
            "PASSBAND_VAR_DIR": str(folder / "var"),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics),
            "PASSBAND_TASKS_PER_JOB": "4",
            "PASSBAND_RECONCILE_EVERY": "2",
            "PASSBAND_STALLED_AFTER": "8",
            "PASSBAND_VISIBILITY_TIMEOUT": "5",
            # The benchmark's own servers listen on 127.0.0.1: allowed as an operator allows a deployment's own.
            "PASSBAND_OUTBOUND_ALLOW_HOSTS": os.environ.get("PASSBAND_OUTBOUND_ALLOW_HOSTS", "127.0.0.1"),
        }
        os.environ.update(
            {
                key: env[key]
                for key in (
                    "DATABASE_URL",
                    "CELERY_BROKER_URL",
                    "SECRET_KEY",
                    "PASSBAND_VAR_DIR",
                    "PASSBAND_OUTBOUND_ALLOW_HOSTS",
                )
            }
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "passband.settings")
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from calibration import services as calibration
        from curation.imports import tasks_import
        from curation.services import environment_create
        from tests.support.openai_server import OpenAITestServer

        call_command("migrate", verbosity=0)
        owner = get_user_model().objects.create_user(username="bench", password="bench")
        results = []
        with OpenAITestServer(latency_s=0.05, record_requests=False) as server:
            for fault in arguments.faults:
                environment = environment_create(name=f"faults-{fault}", domain="math")
                lines = "\n".join(
                    f'{{"key": "t-{i}", "prompt": "Say {i}.", "answer": "42", "verifier": {{"kind": "exact"}}}}'
                    for i in range(arguments.tasks)
                )
                tasks_import(environment=environment, owner=owner, data=lines.encode(), filename="tasks.jsonl")
                model = calibration.probe_model_add(
                    name=f"model-{fault}", backend="openai", base_url=server.base_url, model="m", max_new_tokens=8
                )
                results.append(
                    scenario(
                        fault,
                        services={"redis": redis_server, "postgres": postgres},
                        env=env,
                        folder=folder,
                        tasks=arguments.tasks,
                        rollouts=arguments.rollouts,
                        down_s=arguments.down,
                        setup=(environment, owner, model),
                    )
                )
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(metrics))
        requeued = sum(
            sample.value
            for family in registry.collect()
            for sample in family.samples
            if sample.name == "passband_rounds_requeued_total"
        )
    finally:
        redis_server.kill()
        try:
            postgres.stop_immediately()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"{arguments.tasks} tasks x {arguments.rollouts} rollouts per scenario, each service down {arguments.down:g} s"
    )
    print(
        "| fault | stored / expected | duplicates | attempts in calibrations | rounds queued again "
        "| worker restarts by the supervisor | fault after | finished after recovery |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in results:
        print(
            f"| {row['fault']} | {row['stored']} / {row['expected']} | {row['duplicates']} | {row['calibration_attempts']} "
            f"| {row['stalled_rounds']} | {row['worker_restarts']} | {row['before_fault_s']:.1f} s "
            f"| {row['finish_after_recovery_s']:.1f} s |"
        )
    print(f"passband_rounds_requeued_total over the workers: {requeued:g}")
    ok = all(r["stored"] == r["expected"] == r["calibration_attempts"] and not r["duplicates"] for r in results)
    print("every sample stored exactly once, every attempt counted once" if ok else "MISMATCH: see the table")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
