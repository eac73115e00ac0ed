"""The suite's Celery workers never outlive their run: a worker dies with the pytest process that started it
(Celery's pool processes with it), and a worker a dead run left on the run's broker database is killed before the
next worker starts or the broker is flushed. A live run's workers stay."""

import os
import signal
import subprocess
import sys

import pytest
from django.conf import settings

from tests.support import workers
from tests.support.workers import OWNER_VARIABLE, ROOT, flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.workers]

PARENT = """
import time
import django
django.setup()
from tests.support.workers import start_worker
worker = start_worker(concurrency=1)
print(worker.pid, flush=True)
time.sleep(600)
"""


def group_members(group: int) -> list[int]:
    """Pids of the live (not zombie) processes in a process group."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != b"Z":
            members.append(int(entry))
    return members


def kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.django_db(transaction=True)
def test_a_worker_dies_with_the_pytest_process_that_started_it():
    env = {**os.environ, "DATABASE_URL": workers.test_database_url(), "DJANGO_SETTINGS_MODULE": "passband.settings"}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    worker = None
    try:
        worker = int(parent.stdout.readline())
        # The main process and its pool process are up.
        wait_for(lambda: len(group_members(worker)) >= 2, timeout=60, what="the worker's pool process")
        parent.kill()
        parent.wait()
        wait_for(lambda: not group_members(worker), timeout=30, what="the worker to die with its parent")
    finally:
        parent.kill()
        parent.wait()
        if worker is not None:
            kill_group(worker)


LEFTOVER = """
import subprocess, sys
from tests.support.workers import worker_command
leftover = subprocess.Popen(
    worker_command(queues="default", name="leftover"),
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session=True,
)
print(leftover.pid, flush=True)
"""


@pytest.mark.django_db(transaction=True)
def test_a_worker_left_by_a_dead_run_is_killed_and_a_live_runs_worker_stays():
    # A worker as a run killed before the guard left it: on this run's broker database, naming no owner, its
    # parent gone.
    env = {**os.environ, "DATABASE_URL": workers.test_database_url(), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    env.pop(OWNER_VARIABLE, None)
    starter = subprocess.run(
        [sys.executable, "-c", LEFTOVER], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    leftover = int(starter.stdout)
    try:
        wait_for(lambda: len(group_members(leftover)) >= 2, timeout=60, what="the leftover's pool process")
        with running_worker(queues="default", name="ours") as ours:
            # Starting a worker killed the leftover, pool process and all.
            wait_for(lambda: not group_members(leftover), timeout=30, what="the leftover to be killed")
            # The run's own worker, whose owner lives, stays through a flush.
            flush_broker()
            assert ours.poll() is None
    finally:
        kill_group(leftover)
