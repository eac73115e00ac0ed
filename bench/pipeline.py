"""Pipeline benchmark: rollouts recorded per second end to end, against a raw COPY of the same rows.

End to end means: Celery (Redis broker) -> generate worker -> an OpenAI-compatible server that
answers instantly -> rows in PostgreSQL -> verify worker -> verdicts and calibrations. The baseline
is PostgreSQL's own bulk load (COPY ... FROM STDIN) of the very rows the run produced.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \
        .venv/bin/python bench/pipeline.py --tasks 500 --rollouts 16 --tasks-per-job 32 --samples-per-request 16

Completions are realistic by default: 50-1,000 tokens (median 200, mean about 250) with a logprob
each, in vLLM's answer shape, from a server that replays pre-rendered answers (bench/fake_vllm.py) so
that its own CPU does not count; `--lengths short` gives the ~15-token completions of the test
server that earlier figures used. It also reports the worker processes' peak memory and CPU time and
the rollout table's size per million rollouts and per million tokens; `--profile FILE` runs the
worker under py-spy (collapsed stacks, all its processes) to see where the time goes.

It works in its own database (<name>_bench), created afresh each run.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import campaign_until_done, django_in_fresh_database, exact_match_environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rollouts", type=int, default=16, help="Rollouts per task.")
    parser.add_argument("--round-size", type=int, default=0, help="Rollouts per round (default: all in one round).")
    parser.add_argument("--tasks-per-job", type=int, default=32, help="Task versions per generate/verify job.")
    parser.add_argument("--timeout", type=float, default=900, help="Give up after this many seconds.")
    parser.add_argument("--concurrency", type=int, default=2, help="Prefork processes of the worker.")
    parser.add_argument(
        "--samples-per-request",
        type=int,
        default=16,
        help="Consecutive seeds per request (n), as with vLLM; 1 sends one request per rollout.",
    )
    parser.add_argument("--lengths", choices=["realistic", "short"], default="realistic", help="Completion lengths.")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="Default: 1024 (realistic), 32 (short).")
    parser.add_argument("--profile", default="", help="Run the worker under py-spy; collapsed stacks go to this file.")
    parser.add_argument("--py-spy", default="py-spy", help="The py-spy executable for --profile.")
    args = parser.parse_args()
    max_new_tokens = args.max_new_tokens or (1024 if args.lengths == "realistic" else 32)

    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
    os.environ["PASSBAND_TASKS_PER_JOB"] = str(args.tasks_per_job)  # read by this process and the worker
    round_size = args.round_size or args.rollouts
    django_in_fresh_database(suffix="_bench")
    import redis
    from django.conf import settings
    from django.db import connection

    from bench.fake_vllm import PooledVLLMServer
    from calibration import services
    from calibration.models import Rollout
    from tests.support.openai_server import OpenAITestServer
    from tests.support.workers import worker_command

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    # Realistic completions end in a line "41" or "42": the answer is checked on the last line.
    verifier = {"kind": "exact", "extract": "last_line"} if args.lengths == "realistic" else {"kind": "exact"}
    user, environment = exact_match_environment(tasks=args.tasks, verifier=verifier)

    if args.lengths == "realistic":
        server = PooledVLLMServer(max_tokens=max_new_tokens).start()
    else:
        server = OpenAITestServer(record_requests=False, eos_probability=0.3).start()
    model = services.probe_model_add(
        name="instant",
        backend="openai",
        base_url=server.base_url,
        model="fake-model",
        max_new_tokens=max_new_tokens,
        usd_per_million_input_tokens=0.1,
        usd_per_million_output_tokens=0.4,
        samples_per_request=args.samples_per_request,
    )
    command = worker_command(
        queues="default,generate,verify", concurrency=args.concurrency, name="bench", loglevel="WARNING"
    )
    if args.profile:
        command = [
            args.py_spy,
            "record",
            "--subprocesses",
            "--gil",
            "--rate",
            "50",
            "--format",
            "raw",
            "--output",
            args.profile,
            "--",
            *command,
        ]
    load_before = os.getloadavg()
    worker = subprocess.Popen(command, cwd=ROOT, env=os.environ.copy())
    watch = ProcessWatch(worker.pid, database=connection.settings_dict["NAME"])
    try:
        time.sleep(6)  # let the worker start and connect; startup is not what is measured
        watch.start()
        campaign, elapsed = campaign_until_done(
            environment=environment,
            probe_model=model,
            user=user,
            rollouts=args.rollouts,
            round_size=round_size,
            seed=1,
            timeout_s=args.timeout,
        )
        watch.stop()
    finally:
        if args.profile:  # py-spy writes its file when the worker it started exits
            os.kill(watch.worker_pid() or worker.pid, signal.SIGTERM)
        else:
            worker.terminate()
        worker.wait(timeout=60)
        server.stop()
    load_after = os.getloadavg()
    recorded = Rollout.objects.filter(campaign=campaign, outcome__isnull=False).count()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size('calibration_rollout'), COALESCE(SUM(output_tokens), 0), "
            "COALESCE(SUM(input_tokens), 0) FROM calibration_rollout"
        )
        table_bytes, output_tokens, input_tokens = cursor.fetchone()

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
    print(f"machine load (1-minute average, 2 cores): {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print(
        f"completions: {output_tokens / max(recorded, 1):.0f} tokens on average (prompts {input_tokens / max(recorded, 1):.0f}); "
        f"{output_tokens / elapsed:,.0f} completion tokens/s"
    )
    print(
        f"rollout table: {table_bytes / max(recorded, 1):,.0f} bytes per rollout = {table_bytes / max(recorded, 1) / 1000:,.2f} GB "
        f"per million rollouts, {table_bytes / max(output_tokens + input_tokens, 1):,.2f} bytes per token = "
        f"{table_bytes / max(output_tokens + input_tokens, 1):,.2f} MB per million tokens (prompt and completion)"
    )
    print(watch.report(elapsed=elapsed))
    print(
        "| tasks × rollouts (round) | tasks per job | samples per request | worker processes | pipeline rollouts/s | COPY rows/s | pipeline / COPY |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {args.tasks} × {args.rollouts} ({round_size}) = {recorded:,} | {args.tasks_per_job} | {args.samples_per_request} | {args.concurrency} "
        f"| {pipeline_rate:,.0f} | {copy_rate:,.0f} | {pipeline_rate / copy_rate:.1%} |"
    )


class ProcessWatch:
    """Peak memory (RSS) and CPU time of the worker's processes, sampled every 0.2 s while it runs."""

    def __init__(self, root_pid: int, *, database: str) -> None:
        import psutil

        self.root = psutil.Process(root_pid)
        self.database = database
        self.peak_rss: dict[int, int] = {}
        self.cpu_start: dict[int, float] = {}
        self.cpu_end: dict[int, float] = {}
        self.db_start: dict[int, float] = {}
        self.db_end: dict[int, float] = {}
        self.own_start = self.own_end = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def processes(self):
        import psutil

        try:
            processes = [self.root, *self.root.children(recursive=True)]
            # Under --profile the root is py-spy, whose command line names celery too.
            return [
                process
                for process in processes
                if "celery" in process.cmdline() and "py-spy" not in process.cmdline()[0]
            ]
        except psutil.Error:
            return []

    def worker_pid(self) -> int | None:
        """The Celery main process (under py-spy, the root is py-spy)."""
        processes = self.processes()
        return min(process.pid for process in processes) if processes else None

    def backends(self):
        """PostgreSQL's server processes for the benchmark's database ("postgres: [cluster:] user db host state")."""
        import psutil

        found = []
        for process in psutil.process_iter(["cmdline"]):
            words = " ".join(process.info["cmdline"] or []).split()
            if words[:1] == ["postgres:"] and self.database in words[1:4]:
                found.append(process)
        return found

    def _sample(self, target: dict[int, float], databases: dict[int, float] | None = None) -> None:
        for process in self.processes():
            try:
                times = process.cpu_times()
                target[process.pid] = times.user + times.system
                self.peak_rss[process.pid] = max(self.peak_rss.get(process.pid, 0), process.memory_info().rss)
            except Exception:  # noqa: BLE001 - a process that just exited
                pass
        if databases is not None:
            for process in self.backends():
                try:
                    times = process.cpu_times()
                    databases[process.pid] = times.user + times.system
                except Exception:  # noqa: BLE001
                    pass
        times = os.times()
        own = times.user + times.system
        if target is self.cpu_start:
            self.own_start = own
        else:
            self.own_end = own

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample(self.cpu_end, self.db_end)

    def start(self) -> None:
        self._sample(self.cpu_start, self.db_start)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(self.cpu_end, self.db_end)

    def report(self, *, elapsed: float) -> str:
        rss = ", ".join(f"{value / 2**20:.0f}" for _, value in sorted(self.peak_rss.items()))
        cpu = sum(self.cpu_end.get(pid, 0.0) - self.cpu_start.get(pid, 0.0) for pid in self.cpu_end)
        database = sum(self.db_end.get(pid, 0.0) - self.db_start.get(pid, 0.0) for pid in self.db_end)
        own = self.own_end - self.own_start
        return (
            f"worker processes (main first): peak RSS {rss} MiB\n"
            f"CPU seconds in {elapsed:.1f} s: worker {cpu:.1f}, PostgreSQL (this database) {database:.1f}, "
            f"this process (model server, polling) {own:.1f}; cores busy {(cpu + database + own) / elapsed:.2f} of 2"
        )


if __name__ == "__main__":
    main()
