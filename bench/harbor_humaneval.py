"""Sweep: every HumanEval problem as a Harbor task folder (engine/integrations/harbor_code.py), graded by the
exported tests/test.sh as Harbor runs it, by hand. The oracle's solution (solution/solve.sh) must earn 1 and a
stub body 0 on every problem. The suite grades a representative few with these functions
(tests/engine/integrations/test_harbor_code.py); this runs them all.

    .venv/bin/python bench/harbor_humaneval.py [--problems 164] [--threads 2]

Prints the problems whose oracle did not earn 1 or whose stub did not earn 0, and the time taken; exits 1 if
there is any.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.verifiers._common import humaneval_problems, humaneval_verifier  # noqa: E402
from engine.integrations.harbor_code import code_harbor_folder  # noqa: E402
from engine.verifiers.kinds import code  # noqa: E402

STUBS = ("    pass\n", "    return None\n")


def write_folder(problem: dict, root: Path) -> Path:
    """`problem`'s Harbor task folder under `root`, with the code verifier the demo imports it with."""
    verifier = humaneval_verifier(problem, timeout_seconds=10)
    folder = root / problem["task_id"].replace("/", "-")
    files = code_harbor_folder(
        key=folder.name,
        prompt=problem["prompt"],
        answer=problem["canonical_solution"],
        raw_config=verifier,
        config=code.parse_config(verifier),
    )
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


def reward(folder: Path, *, stub: str | None) -> str:
    """The verifier's reward with the oracle's solution (stub None), else with `stub` as the body the agent
    wrote into the starting file."""
    app, logs = folder / "run" / "app", folder / "run" / "logs"
    app.mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "APP": str(app), "LOGS": str(logs)}
    if stub is None:
        subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, capture_output=True)
    else:
        (app / "solution.py").write_text((folder / "environment" / "solution.py").read_text() + stub)
    subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, timeout=120)
    return (logs / "reward.txt").read_text().strip()


def graded(problems: list[dict], root: Path, *, threads: int = 2) -> list[tuple[str, str, str]]:
    """(task id, the oracle's reward, a stub's reward) for each problem's folder, written under `root`."""

    def grade(index_problem):
        index, problem = index_problem
        folder = write_folder(problem, root)
        return problem["task_id"], reward(folder, stub=None), reward(folder, stub=STUBS[index % len(STUBS)])

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(grade, enumerate(problems)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=164, help="the first N problems (164: all)")
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()
    problems = humaneval_problems()[: options.problems]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="harbor-humaneval-") as root:
        results = graded(problems, Path(root), threads=options.threads)
    seconds = time.perf_counter() - started
    unpaid = [task for task, oracle, _ in results if oracle != "1"]
    stub_paid = [task for task, _, stubbed in results if stubbed != "0"]
    print(f"{len(results)} folders graded in {seconds:.1f} s ({options.threads} threads)")
    print(f"oracle earned 1: {len(results) - len(unpaid)} of {len(results)}; not: {unpaid or 'none'}")
    print(f"stub earned 0: {len(results) - len(stub_paid)} of {len(results)}; not: {stub_paid or 'none'}")
    return 1 if unpaid or stub_paid else 0


if __name__ == "__main__":
    sys.exit(main())
