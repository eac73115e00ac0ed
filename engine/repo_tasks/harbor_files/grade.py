"""Passband's repository grading inside a Harbor container: the agent's edits, graded as a patch.

    python3 grade.py TESTBED LOGS

The edits are the difference between ``TESTBED`` and the pristine snapshot (``pristine.tar.gz``,
shipped with the tests, out of the agent's reach), as a unified diff of its text files; that patch is
graded exactly as Passband grades an answer (``engine.repo_tasks.grading``: the same filter, runner,
guard and evidence). Writes 1 or 0 to ``LOGS/reward.txt`` and the verdict to ``LOGS/verdict.json``.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "passband"))

from engine.repo_tasks.grading import RepoTaskSpec, grade  # noqa: E402
from engine.repo_tasks.patches import diff_files  # noqa: E402
from engine.repo_tasks.snapshots import read_files  # noqa: E402

SKIPPED = (".git", "__pycache__", ".pytest_cache")


def texts(files):
    found = {}
    for path, data in files.items():
        try:
            found[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return found


def testbed_files(root):
    files = {}
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if name not in SKIPPED]
        for name in names:
            path = os.path.join(directory, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                files[os.path.relpath(path, root)] = handle.read()
    return files


def main():
    testbed, logs = sys.argv[1], sys.argv[2]
    with open(os.path.join(HERE, "spec.json"), encoding="utf-8") as handle:
        spec = RepoTaskSpec(**{key: tuple(v) if isinstance(v, list) else v for key, v in json.load(handle).items()})
    with open(os.path.join(HERE, "pristine.tar.gz"), "rb") as handle:
        snapshot = handle.read()
    patch = diff_files(texts(read_files(snapshot)), texts(testbed_files(testbed)))
    result = grade(task=spec, snapshot=snapshot, patch=patch)
    verdict = {"outcome": result.outcome, "detail": result.detail, "evidence": list(result.evidence)}
    with open(os.path.join(logs, "verdict.json"), "w", encoding="utf-8") as handle:
        json.dump(verdict, handle, indent=1)
    with open(os.path.join(logs, "reward.txt"), "w", encoding="utf-8") as handle:
        handle.write("1\n" if result.outcome == "pass" else "0\n")
    print(result.outcome, result.detail)


main()
