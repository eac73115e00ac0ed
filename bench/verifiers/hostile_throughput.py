"""Benign code checks per second while hostile programs run alongside, against benign alone.

    .venv/bin/python bench/verifiers/hostile_throughput.py [--seconds 20] [--hostile-threads 2] [--no-write]

Benign: HumanEval canonical solutions through verify(kind=code), one calling thread, cycling
through the 164 problems for --seconds: before the hostile programs, while they run, and after
they stopped (the same server: what they did must not slow it down for good). Hostile:
--hostile-threads more threads of the same process submit, back to back through the same fork
server, an infinite loop, a fork bomb, a memory bomb, 100 MB of output, a sleeper, an early
os._exit(0) and results that claim to equal anything (each limited to 3 s of wall time and 2 s
of CPU). Prints a markdown table and rewrites the "hostile" section of docs/benchmarks-verifiers.md.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import threading
import time

# _common puts the repository on sys.path, so it comes before the package imports.
from _common import (
    humaneval_problems,
    humaneval_verifier,
    markdown_table,
    write_section,
)

from engine.sandbox import default_sandbox
from engine.verifiers import verify

HOSTILE_TASK = {
    "kind": "code",
    "style": "asserts",
    "asserts": ["assert solve() == 42"],
    "timeout_seconds": 3,
    "cpu_seconds": 2,
    "memory_mb": 256,
}
HOSTILE_PROGRAMS = {
    "infinite loop": "def solve():\n    while True:\n        pass\n",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory bomb": "hoard = []\nwhile True:\n    hoard.append(bytearray(50 << 20))\n",
    "100 MB output": "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))\n",
    "sleeper": "import time\ntime.sleep(3600)\n",
    "early os._exit(0)": "import os\nos._exit(0)\n",
    "__eq__ always true": (
        "class Anything(int):\n    def __eq__(self, other):\n        return True\ndef solve():\n    return Anything()\n"
    ),
}


def benign_rate(problems: list[dict], seconds: float) -> tuple[float, int, int]:
    """Checks per second of one thread verifying canonical solutions for ``seconds``."""
    done = passed = 0
    started = time.perf_counter()
    for problem in itertools.cycle(problems):
        verdict = verify(
            verifier=humaneval_verifier(problem, timeout_seconds=10), completion=problem["canonical_solution"]
        )
        done += 1
        passed += verdict.outcome == "pass"
        if time.perf_counter() - started >= seconds:
            break
    return done / (time.perf_counter() - started), done, passed


def hostile_worker(stop: threading.Event, outcomes: collections.Counter, offset: int) -> None:
    names = list(HOSTILE_PROGRAMS)
    for index in itertools.count(offset):
        if stop.is_set():
            return
        name = names[index % len(names)]
        verdict = verify(verifier=HOSTILE_TASK, completion=HOSTILE_PROGRAMS[name])
        outcomes[(name, verdict.outcome, verdict.detail)] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--hostile-threads", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    arguments = parser.parse_args()

    problems = humaneval_problems()
    isolation = default_sandbox().isolation()["mode"]
    benign_rate(problems, 1.0)  # warm-up

    rows = []

    def measure(workload: str) -> float:
        load = os.getloadavg()[0]
        rate, done, passed = benign_rate(problems, arguments.seconds)
        relative = f"{rate / rows[0][-1]:.0%} of before" if rows else "-"
        rows.append(
            [workload, f"{load:.1f} to {os.getloadavg()[0]:.1f}", f"{rate:.1f}", f"{passed}/{done}", relative, rate]
        )
        return rate

    measure("benign, before the hostile programs")
    stop = threading.Event()
    outcomes: collections.Counter = collections.Counter()
    threads = [
        threading.Thread(target=hostile_worker, args=(stop, outcomes, offset), daemon=True)
        for offset in range(arguments.hostile_threads)
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # let the hostile programs get going
    measure(f"benign + {arguments.hostile_threads} hostile streams")
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    measure("benign, after the hostile programs")

    table = markdown_table(
        ["workload", "load average (1 min)", "benign checks/s", "benign passed", "relative"],
        [row[:-1] for row in rows],
    )
    hostile_rows = [[name, outcome, detail, count] for (name, outcome, detail), count in sorted(outcomes.items())]
    hostile_table = markdown_table(["hostile program", "verdict", "detail", "runs"], hostile_rows)
    body = (
        f"Command: `.venv/bin/python bench/verifiers/hostile_throughput.py --seconds {arguments.seconds:g} "
        f"--hostile-threads {arguments.hostile_threads}`\n\n"
        f"Isolation: {isolation}. One thread verifies HumanEval canonical solutions for {arguments.seconds:g}s, "
        f"first alone, then while {arguments.hostile_threads} other threads of the same process keep the same "
        "fork server busy with hostile programs (3 s wall, 2 s CPU, 256 MB each), then alone again once they "
        "stopped. On a 2-core machine the CPU-bound hostile programs take their CPU limit from the same cores, "
        "so benign throughput drops while they run; what matters is that every benign check still passes, no "
        "hostile run passes or escapes, and the rate comes back afterwards. The load average is the "
        "machine's (other work included), before and after each row.\n\n"
        + table
        + "\n\nHostile runs finished during the measurement:\n\n"
        + hostile_table
    )
    print(table)
    print()
    print(hostile_table)
    if not arguments.no_write:
        write_section("hostile", "Benign throughput under hostile load", body)


if __name__ == "__main__":
    main()
