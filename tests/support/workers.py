"""Start real Celery worker processes against the test database and a real Redis broker.

A worker must not outlive the pytest process that started it: one left behind by a killed run keeps consuming
from the run's broker database and steals the next run's jobs. So each worker dies with its parent (the kernel
sends it SIGKILL, and Celery's pool processes die with it), and each carries its owner's pid and start time in
its environment: starting a worker, or flushing the broker, first kills the workers on the same broker database
whose owner is gone (a beat process that outlived its worker), or, naming no owner (left by a run killed before
this guard), whose parent is gone.
"""

from __future__ import annotations

import ctypes
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
# The worker's environment names the pytest process that owns it: "<pid>:<start time in clock ticks>".
OWNER_VARIABLE = "PASSBAND_TEST_WORKER_OWNER"
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


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


test_database_url.__test__ = False  # a helper: a test module that imports it must not collect it as a test


def flush_broker() -> None:
    """Empty the run's broker database, after killing any worker a dead run left consuming from it."""
    kill_orphaned_workers(settings.CELERY_BROKER_URL)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


def _stat_fields(pid: int) -> list[bytes]:
    """/proc/<pid>/stat's fields after the command name (which, in parentheses, may hold spaces): state first."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot): with the pid, names one process, never a reused pid."""
    try:
        return _stat_fields(pid)[19].decode()
    except (OSError, IndexError):
        return None


def _owner_tag(pid: int) -> str:
    return f"{pid}:{_start_time(pid)}"


def _owner_alive(tag: str) -> bool:
    pid, _, started = tag.partition(":")
    return pid.isdigit() and _start_time(int(pid)) == started


def _parent_is_python(pid: int) -> bool:
    """Whether the process still has the kind of parent that starts workers (pytest, a bench script, or the
    worker's own main process); an orphan's parent is init or a subreaper."""
    try:
        parent = int(_stat_fields(pid)[1])
        with open(f"/proc/{parent}/cmdline", "rb") as cmdline:
            program = cmdline.read().split(b"\0")[0]
    except (OSError, IndexError, ValueError):
        return False
    return parent != 1 and os.path.basename(program).startswith(b"python")


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        items = environ.read().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in items if b"=" in item)


def orphaned_workers(broker_url: str) -> list[int]:
    """Pids of Celery worker processes of this project (the main process, pool and beat processes) consuming from
    `broker_url` whose owning pytest process is gone; or, for one that names no owner (started before owners were
    recorded, or by a bench script), whose parent is gone."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
            if b"celery" not in argv or b"passband" not in argv or b"worker" not in argv:
                continue
            environ = _environ(pid)
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if environ.get("CELERY_BROKER_URL") != broker_url:
            continue
        owner = environ.get(OWNER_VARIABLE)
        if not (_owner_alive(owner) if owner else _parent_is_python(pid)):
            found.append(pid)
    return found


def kill_orphaned_workers(broker_url: str) -> list[int]:
    """SIGKILL the orphaned workers on `broker_url` (see orphaned_workers), each with its process group (a worker
    runs in a session of its own); returns their pids."""
    pids = orphaned_workers(broker_url)
    own_group = os.getpgrp()
    for pid in pids:
        try:
            group = os.getpgid(pid)
            if group != own_group:
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def _die_with_parent(parent: int):
    """A preexec_fn: the kernel sends the worker SIGKILL when the thread that started it ends (pytest's main
    thread: the run), and a parent that died before this point means exit at once."""

    def preexec() -> None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


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
    as a worker on another machine would. It dies with the thread that starts it: start it from the test's."""
    kill_orphaned_workers(settings.CELERY_BROKER_URL)
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        # Named even where settings fall back to their default, so that a leftover can be told by its broker.
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        OWNER_VARIABLE: _owner_tag(os.getpid()),
        **(extra_env or {}),
    }
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
        preexec_fn=_die_with_parent(os.getpid()),
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
