"""Importing a large task file: time and peak Python memory, streamed from disk vs. held in memory.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/imports.py --lines 20000 100000

For each size it writes a JSONL file of math tasks (~250-character prompts with metadata), then
imports it twice into a fresh database: from the file on disk (`path=`, what a background import
does) and from bytes in memory (`data=`, what a small upload in a request does). It reports the
wall time and tracemalloc's peak; the file's own size is the baseline a held-in-memory import
cannot go under. Works in its own database (<name>_imports), created afresh each run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database  # noqa: E402


def write_file(path: Path, lines: int, *, offset: int) -> None:
    with open(path, "w", encoding="utf-8") as stream:
        for index in range(lines):
            number = offset + index
            stream.write(
                json.dumps(
                    {
                        "key": f"bench/{number:07d}",
                        "prompt": f"A shop sells {number} apples on Monday and {number % 97} more on Tuesday. " * 3
                        + "How many in all?",
                        "answer": str(number + number % 97),
                        "verifier": {"kind": "math"},
                        "metadata": {"source": "bench", "level": number % 5, "tags": ["arithmetic", "story"]},
                        "authoring_cost_usd": 250,
                    }
                )
                + "\n"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[20000, 100000])
    args = parser.parse_args()
    os.environ.setdefault("PASSBAND_MAX_UPLOAD_BYTES", str(1 << 30))
    django_in_fresh_database(suffix="_imports")
    from django.contrib.auth import get_user_model

    from curation.imports import tasks_import
    from curation.models import Task
    from curation.services import environment_create

    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench")
    print("| lines | file MB | source | seconds | lines/s | peak Python MB | peak / file size |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for run, lines in enumerate(args.lines):
            for source in ("path", "data"):
                environment = environment_create(
                    name=f"bench-{run}-{source}", domain="math", default_verifier={"kind": "math"}
                )
                path = Path(folder) / f"{lines}-{source}.jsonl"
                write_file(path, lines, offset=0)
                size_mb = path.stat().st_size / 1e6
                tracemalloc.start()
                started = time.perf_counter()
                kwargs = {"path": path} if source == "path" else {"data": path.read_bytes()}
                tasks_import(environment=environment, owner=user, filename=path.name, run_audits=False, **kwargs)
                elapsed = time.perf_counter() - started
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                assert Task.objects.filter(environment=environment).count() == lines
                print(
                    f"| {lines:,} | {size_mb:.1f} | {source} | {elapsed:.1f} | {lines / elapsed:,.0f} "
                    f"| {peak / 1e6:.1f} | {peak / 1e6 / size_mb:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
