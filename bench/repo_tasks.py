"""Benchmark: grading one repository task in the sandbox against pytest run directly on the same repository.

    .venv/bin/python bench/repo_tasks.py [--tasks 5] [--repeat 3]

For each of the first demo tasks (inflection 0.5.1, 455 tests), alternating the two: the median wall time of
``engine.repo_tasks.grading.grade`` with the reference patch (fresh copy unpacked in the sandbox,
patch applied, clean-up, pytest in a child process, evidence read back) and of ``python -m pytest``
on an already patched copy on disk with the same test file and options. The difference is the
sandbox's and the fresh copy's cost per test run. Then an episode's tool calls on one task's
repository (each a sandbox run on a fresh copy with the rollout's overlay): ``read_file`` (whose
direct cost is negligible: the whole figure is overhead) and ``run_tests`` on the same test file.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.repo_demo import TEST_FILE, load_definitions, pristine_files, snapshot_bytes, with_bug  # noqa: E402
from engine.repo_tasks.grading import PYTEST_ARGS, RepoTaskSpec, grade, grade_many  # noqa: E402
from engine.repo_tasks.patches import diff_files  # noqa: E402
from engine.repo_tasks.snapshots import digest_of  # noqa: E402
from engine.repo_tasks.world import RepoWorld  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4, help="patches graded together (grade_many) per task")
    options = parser.parse_args()
    definitions = load_definitions()
    pristine = pristine_files()
    sandboxed, direct, batched = [], [], []
    for bug in definitions["tasks"][: options.tasks]:
        buggy = with_bug(pristine, bug)
        data = snapshot_bytes(buggy)
        spec = RepoTaskSpec(
            snapshot=digest_of(data),
            fail_to_pass=tuple(bug["fail_to_pass"]),
            pass_to_pass=tuple(t for t in definitions["passing_tests"] if t not in set(bug["fail_to_pass"])),
            hidden_tests={TEST_FILE: pristine[TEST_FILE]},
        )
        patch = diff_files(buggy, pristine)
        grade(task=spec, snapshot=data, patch=patch)  # warm the sandbox server
        with tempfile.TemporaryDirectory() as folder:
            for path, text in pristine.items():
                target = Path(folder) / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            # Alternated, so a change in the machine's load falls on both.
            for _ in range(options.repeat):
                started = time.perf_counter()
                result = grade(task=spec, snapshot=data, patch=patch)
                sandboxed.append(time.perf_counter() - started)
                assert result.outcome == "pass", result.detail
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "pytest", *PYTEST_ARGS, TEST_FILE],
                    cwd=folder,
                    capture_output=True,
                    check=True,
                    env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"},
                )
                direct.append(time.perf_counter() - started)
            batch = options.batch
            started = time.perf_counter()
            results = grade_many(task=spec, snapshot=data, patches=[patch] * batch)
            batched.append((time.perf_counter() - started) / batch)
            assert {each.outcome for each in results} == {"pass"}
    grade_median, direct_median = statistics.median(sandboxed), statistics.median(direct)
    # Episode tool calls on the last task's repository: each is a sandbox run on a fresh copy + overlay.
    world = RepoWorld(snapshot=data)
    world.call("apply_diff", {"diff": patch})
    reads, test_runs = [], []
    for _ in range(options.repeat * 3):
        started = time.perf_counter()
        world.call("read_file", {"path": "inflection/__init__.py"})
        reads.append(time.perf_counter() - started)
    for _ in range(options.repeat):
        started = time.perf_counter()
        world.call("run_tests", {"paths": [TEST_FILE]})
        test_runs.append(time.perf_counter() - started)
    print(f"tasks {options.tasks}, runs each {options.repeat}")
    print(f"grade() in the sandbox, median  {grade_median * 1000:.0f} ms")
    print(f"pytest directly, median         {direct_median * 1000:.0f} ms")
    print(f"overhead per test run           {(grade_median - direct_median) * 1000:.0f} ms")
    print(f"grade() / pytest directly       {grade_median / direct_median:.2f}x")
    print(f"grade_many(), per patch, median {statistics.median(batched) * 1000:.0f} ms")
    # Gradings side by side: two at a time (the 2 cores) against one after the other, same work.
    started = time.perf_counter()
    for _ in range(4):
        grade(task=spec, snapshot=data, patch=patch)
    one_by_one = time.perf_counter() - started
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda _: grade(task=spec, snapshot=data, patch=patch), range(4)))
    two_at_a_time = time.perf_counter() - started
    print(f"4 gradings one by one           {one_by_one * 1000:.0f} ms")
    print(f"4 gradings two at a time        {two_at_a_time * 1000:.0f} ms")
    print(f"episode read_file call, median  {statistics.median(reads) * 1000:.0f} ms")
    print(f"episode run_tests call, median  {statistics.median(test_runs) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
