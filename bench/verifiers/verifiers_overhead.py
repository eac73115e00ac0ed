"""The verifiers_reward verifier against the taskset's own rewards called directly.

Passband scores every rollout of a verifiers taskset in a locked-down helper process
(engine/verifiers/verifiers_worker.py): the completion goes over a pipe as JSON, the helper rebuilds the
task from its stored wire data, builds the finished trace and awaits verifiers' ``Task.score`` (every
``@vf.reward``, weighted). "Direct" does the same in this process with the tasks the taskset's loader
yielded: the trace built and ``Task.score`` awaited on one event loop, no helper, no JSON. The right answer and a wrong one
alternate; one warm-up call first (the helper's start, a few seconds of importing verifiers, is paid once
per worker process). The taskset is tests/plugins/vf-word-arithmetic (``make install`` installs it).

    .venv/bin/python bench/verifiers/verifiers_overhead.py --repeat 50 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.integrations import verifiers_tasks  # noqa: E402
from engine.task_mapping import ColumnMapping  # noqa: E402
from engine.verifiers import (
    verifiers_worker,  # noqa: E402
    verify,  # noqa: E402
)

TASKSET = "vf-word-arithmetic"
MAPPING = ColumnMapping(prompt="{prompt}", answer_column="solution", answer_extractor="after_hashes", key_column="key")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="passes over the taskset's 8 tasks a round")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()

    loaded = verifiers_tasks.taskset_rows(TASKSET)
    tasks, _ = verifiers_tasks.taskset_tasks(loaded, mapping=MAPPING, reference_format="\\boxed{{answer}}")
    tasks = json.loads(json.dumps(tasks))
    cases = []
    for index, task in enumerate(tasks * options.repeat):
        completion = f"So \\boxed{{{task['answer'] if index % 2 == 0 else 'no idea'}}}"
        cases.append((task, completion))
    verify(verifier=tasks[0]["verifier"], completion="warm-up", prompt=tasks[0]["prompt"])

    verifiers_worker._load()
    vf = verifiers_worker._loaded["vf"]
    config = vf.taskset_config_type(TASKSET).model_validate({"id": TASKSET})
    by_key = {task.key: task for task in vf.load_taskset(config)}

    def passband() -> None:
        for task, completion in cases:
            verify(verifier=task["verifier"], completion=completion, answer=task["answer"], prompt=task["prompt"])

    loop = asyncio.new_event_loop()

    def direct() -> None:
        for task, completion in cases:
            own = by_key[task["key"]]
            trace = verifiers_worker._trace(own, task["prompt"], [{"role": "assistant", "content": completion}])
            loop.run_until_complete(own.score(trace))

    results: dict[str, list[float]] = {"passband": [], "direct": []}
    for _ in range(options.rounds):
        for label, run in (("passband", passband), ("direct", direct)):
            started = time.perf_counter()
            run()
            results[label].append(len(cases) / (time.perf_counter() - started))
    for label, rates in results.items():
        median, worst = statistics.median(rates), min(rates)
        print(f"{label}: {median:,.0f} verifications/s median, worst {worst:,.0f} ({len(cases)} a round)")
    added = 1e6 / statistics.median(results["passband"]) - 1e6 / statistics.median(results["direct"])
    print(f"per verification, Passband adds {added:,.0f} µs")


if __name__ == "__main__":
    main()
