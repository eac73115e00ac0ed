"""Busy-day benchmark: the longest write transaction of `make run`'s processes under load, and what sign-ins waited.

Runs tests/support/busy_day.py's day (the SQLite file, the filesystem broker and the real workers under
scripts/run-local.sh in a temporary folder: a repository upload, the similarity index of the demo set and a
campaign at once, sign-ins and uploads in loops beside them, the generate worker killed in the middle) and prints:
the longest write transaction of each process (passband/write_timer.py: BEGIN to COMMIT or ROLLBACK), the
sign-ins' seconds (the first one, before the load, is the baseline), the repository upload's seconds, and the
rounds beat queued again. Results: docs/benchmarks.md ("A busy day on the embedded default").

    .venv/bin/python bench/busy_day.py --tasks 12 --latency 0.5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.busy_day import busy_day  # noqa: E402
from tests.support.openai_server import OpenAITestServer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12, help="Arithmetic tasks in the campaign (2 rollouts each).")
    parser.add_argument("--latency", type=float, default=0.5, help="Seconds the scripted model takes per request.")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="passband-busy-day-") as folder:
        with OpenAITestServer(latency_s=arguments.latency, record_requests=False) as model:
            report = busy_day(Path(folder), model_url=model.base_url, tasks=arguments.tasks)
    for entry in sorted(report.write_reports, key=lambda entry: -entry["max_ms"]):
        print(f"{entry['max_ms']:9.1f} ms  {entry['process'][:90]}\n             {entry['statement'][:110]}")
    seconds = [answer.ended - answer.started for answer in report.sign_ins]
    first = report.first_sign_in.ended - report.first_sign_in.started
    upload = report.repository_upload
    during = [a for a in report.sign_ins if upload and upload.started < a.started and a.ended < upload.ended]
    statuses = sorted({answer.status for answer in report.sign_ins + report.uploads})
    print(f"longest write transaction: {report.longest_write['max_ms']:.1f} ms")
    print(
        f"sign-ins: {len(seconds)}, first (before the uploads and the campaign) {first:.2f} s, median {statistics.median(seconds):.2f} s,"
        f" longest {max(seconds):.2f} s; {len(during)} answered during the repository upload"
        f" ({upload.ended - upload.started:.1f} s, status {upload.status})"
        if upload
        else ""
    )
    print(
        f"task uploads: {len(report.uploads)}; statuses seen: {statuses}; server 5xx lines: {len(report.server_errors)}"
    )
    print(
        f"campaign: {report.campaign}; restarted by the supervisor: {report.restarted}; alive: {report.workers_alive}"
    )
    print(f"demo versions {report.versions}, signatures {report.indexed}")


if __name__ == "__main__":
    main()
