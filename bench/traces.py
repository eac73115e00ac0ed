"""Training-trace benchmark: rows per second turning rollouts into traces (engine.traces) and writing them
as JSONL and Parquet, against writing the same rollouts' columns as JSONL untouched, in the same run.

    .venv/bin/python bench/traces.py --rollouts 20000

Rollouts are generated in memory, shaped like the pipeline benchmark's: a 200-token prompt and a
~250-token completion with a logprob per token (single turn), plus one 3-turn episode in ten (a
300-token first prompt, 60 sampled tokens a turn, 40 environment tokens between turns). No database:
this measures the part the export adds over reading the rows (bench/export.py measures streaming reads).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import formats, traces  # noqa: E402

POLICY = {"name": "bench", "backend": "openai", "model": "bench", "file": "", "revision": "r1"}


def rollouts(count: int, *, seed: int = 0) -> list[dict]:
    generator = random.Random(seed)

    def ids(n: int) -> list[int]:
        return [generator.randrange(49152) for _ in range(n)]

    def logprobs(n: int) -> list[float]:
        return [-generator.random() * 3 for _ in range(n)]

    records = []
    for index in range(count):
        record = {
            "rollout_id": index,
            "campaign": 1,
            "task_key": f"task-{index // 16}",
            "environment": "bench",
            "version_hash": "h" * 64,
            "sample_index": index % 16,
            "seed": index,
            "policy": POLICY,
            "sampling": {"temperature": 1.0, "top_p": 1.0},
            "capture": "exact",
            "logprob_source": "pre_sampling",
            "prompt_ids_source": "server",
            "text": "x" * 900,
            "finish_reason": "stop",
            "truncated": False,
            "outcome": "pass",
            "reward": 1.0,
            "detail": "ok",
            "episode": None,
        }
        if index % 10 == 9:
            prompt, turns = ids(300), []
            for turn_index in range(3):
                completion = ids(60)
                environment = ids(40) if turn_index < 2 else None
                turns.append(
                    {
                        "prompt_token_ids": list(prompt),
                        "completion_token_ids": completion,
                        "logprobs": logprobs(60),
                        "environment_token_ids": environment,
                        "text": "y" * 200,
                    }
                )
                prompt = prompt + completion + (environment or [])
            record |= {
                "episode": {"turns": turns},
                "prompt_token_ids": None,
                "completion_token_ids": None,
                "logprobs": None,
            }
        else:
            record |= {"prompt_token_ids": ids(200), "completion_token_ids": ids(250), "logprobs": logprobs(250)}
        records.append(record)
    return records


def timed(label: str, count: int, work) -> float:
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    print(f"{label:<44} {count / seconds:>10,.0f} rows/s  ({seconds:.2f} s)")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=20000)
    count = parser.parse_args().rollouts
    records = rollouts(count)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)

        def raw_jsonl() -> None:
            with open(out / "raw.jsonl", "wb") as stream:
                formats.write_jsonl(rows=records, stream=stream)

        timed("baseline: the rollouts' columns as JSONL", count, raw_jsonl)
        timed("traces only (trace_of, nothing written)", count, lambda: [traces.trace_of(r) for r in records])
        for file_type in ("jsonl", "parquet"):
            path = out / f"traces.{file_type}"
            timed(
                f"traces as {file_type}",
                count,
                lambda file_type=file_type, path=path: traces.write_traces(
                    rows=(traces.trace_of(r) for r in records), file_type=file_type, path=path
                ),
            )
            print(f"{'':<44} {path.stat().st_size / count:>10,.0f} bytes a row")


if __name__ == "__main__":
    main()
