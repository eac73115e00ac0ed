"""Start real Celery worker processes against the test database and a real Redis broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """DATABASE_URL pointing at the test database that pytest-django created (on SQLite, a file:
    settings.py names one for tests, so worker processes and the live server open the same database)."""
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        if connection.is_in_memory_db():
            pytest.skip("Real worker processes need a database file; SQLite's test database is in memory here.")
        return "sqlite:///" + str(Path(name).resolve())
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + name))


def flush_broker() -> None:
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def worker_command(
    *,
    queues: str,
    concurrency: int = 1,
    pool: str = "prefork",
    name: str = "test",
    beat_schedule: Path | None = None,
    loglevel: str = "INFO",
) -> list[str]:
    """The worker's command line; with `beat_schedule`, beat runs inside it (`-B`), keeping its state there."""
    beat = ["--beat", "--schedule", str(beat_schedule)] if beat_schedule else []
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "passband",
        "worker",
        "-Q",
        queues,
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        "--hostname",
        f"{name}@%h",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        loglevel,
        *beat,
    ]


def start_worker(
    *,
    queues: str = "default,generate,verify",
    concurrency: int = 1,
    pool: str = "prefork",
    name: str = "test",
    extra_env: dict | None = None,
    log_path: Path | None = None,
    beat_schedule: Path | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen:
    """A worker process; with `cwd`, it runs from that folder (the checkout's code found through PYTHONPATH),
    as a worker on another machine would."""
    env = {**os.environ, "DATABASE_URL": test_database_url(), **(extra_env or {})}
    if cwd is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    return subprocess.Popen(
        worker_command(queues=queues, concurrency=concurrency, pool=pool, name=name, beat_schedule=beat_schedule),
        cwd=cwd or ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_worker(process: subprocess.Popen, *, hard: bool = False) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGKILL if hard else signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def running_worker(**kwargs):
    process = start_worker(**kwargs)
    try:
        yield process
    finally:
        stop_worker(process)


def wait_for(predicate, *, timeout: float, interval: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
