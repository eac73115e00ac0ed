"""Code tasks (the ``code`` verifier: humaneval, asserts and stdio styles) as Harbor task folders.

    instruction.md            the prompt, and where the program goes (/app/solution.py)
    task.toml                 Harbor's task config: [metadata] passband_key, passband_verifier, passband_style;
                              the verifier's and the agent's timeouts; the environment's memory
    environment/Dockerfile    a plain Python image; /app/solution.py starts as the task's code_prefix
    environment/solution.py   that starting file (the function's signature and docstring, or empty)
    tests/test.sh             runs tests/grade.py, which writes 1 or 0 to /logs/verifier/reward.txt and
                              Passband's verdict (outcome, detail, isolation) to /logs/verifier/verdict.json
    tests/grade.py            calls Passband's own ``code`` verifier on /app/solution.py: reward 1 only on ``pass``
    tests/passband/engine/... Passband's sandbox (engine/sandbox, its runtime/) and the ``code`` kind with the
                              modules it imports (engine/verifiers/base.py, kind.py, text.py), copied byte for byte
                              from the installed Passband at export time (standard library only); the
                              packages' ``__init__.py`` above them are bare markers, so that importing the
                              ``code`` kind does not import every other kind
    tests/passband/settings.json  the completion size cap in force (``engine.verifiers.max_completion_chars``)
    tests/config.json         the task's verifier config
    solution/solve.sh         writes the reference answer to /app/solution.py (Harbor's oracle agent)

So the verdict is decided by the same code in Harbor as in Passband: the program runs in the sandbox's
program process, the tests in its judge process, values cross by value, a pass needs the judge's nonce
(engine/sandbox/__init__.py). A completion earns 1 in the folder exactly when Passband's ``verify`` says
``pass`` (tests/engine/integrations/test_harbor_code.py runs the red-team corpus through both). Passband's
``error`` and ``timeout`` (no reward there) are 0 here: Harbor's reward is a number. Docker's default
seccomp profile refuses user namespaces, so in Harbor's container the sandbox usually runs in its
fallback isolation (docs/verifiers.md); the program/judge split, which is what refuses the corpus, is
the same there, but the fallback is no security boundary: a program aimed at this folder could read
tests/config.json or leave a process that rewrites the reward file (docs/trainers.md). What does not
travel: extraction of code from a chat reply (the agent writes the file; the file is the completion).
The verifier shares the agent's container (Harbor's ``shared`` mode): an agent with root there could
replace the interpreter grade.py runs on; ``python3 -I -S`` only shuts out
environment variables and site plants (docs/trainers.md). ``APP`` and ``LOGS`` override /app and
/logs/verifier, so the verifier runs by hand too; ``PASSBAND_SANDBOX_ISOLATION`` (auto, namespaces,
fallback) is read as in Passband.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import engine.sandbox
from engine.harbor_tasks import task_toml, test_sh_head
from engine.verifiers import max_completion_chars
from engine.verifiers.kinds.code import CodeConfig
from engine.verifiers.text import defines_function, extract_python_code

AGENT_SECONDS = 900.0

TEST_SH = (
    test_sh_head(
        what="Passband code task verifier (Harbor): Passband's own code verifier on /app/solution.py.",
        workdir='APP="${APP:-/app}"',
    )
    + r"""reward="$(python3 -I -S "$HERE/grade.py" "$APP/solution.py" "$LOGS/verdict.json")" || reward=0
[ "$reward" = 1 ] || reward=0
# Written afresh whatever the program left there (a file, or a link to one it controls).
rm -f "$LOGS/reward.txt"
echo "$reward" > "$LOGS/reward.txt"
echo "$reward"
"""
)

GRADE_PY = r'''"""Passband's `code` verifier on a Harbor agent's program (standard library only).

Usage: grade.py SOLUTION VERDICT_JSON. Prints the reward, 1 when Passband's verdict is `pass`, else 0, and
writes the verdict (outcome, detail, the sandbox's isolation mode) to VERDICT_JSON. The verifier is
Passband's own, copied under passband/ at export time: the VERIFIER_KIND of engine/verifiers/kinds/code.py,
run by engine.verifiers.base.run_check as Passband's `verify` runs it.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "passband"))

from engine.sandbox import SandboxUnavailable, default_sandbox  # noqa: E402
from engine.verifiers.base import run_check  # noqa: E402
from engine.verifiers.kinds import code  # noqa: E402


def read(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def main(solution, verdict_path):
    settings = read(os.path.join(HERE, "passband", "settings.json"))
    try:
        with open(solution, encoding="utf-8", errors="replace") as file:
            completion = file.read()
    except OSError as error:
        print("no solution: %s" % error, file=sys.stderr)
        completion = ""
    verdict = run_check(
        code.VERIFIER_KIND,
        code.parse_config(read(os.path.join(HERE, "config.json"))),
        completion=completion,
        answer=None,
        prompt=None,
        max_completion_chars=settings["max_completion_chars"],
    )
    try:
        isolation = default_sandbox().isolation().get("mode")
    except SandboxUnavailable as error:
        isolation = "unavailable: %s" % error
    record = dict(verdict.to_dict(), isolation=isolation)
    with open(verdict_path, "w", encoding="utf-8") as file:
        json.dump(record, file, indent=1)
    print("%s: %s" % (verdict.outcome, verdict.detail), file=sys.stderr)
    return 1 if verdict.outcome == "pass" else 0


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]))
'''

# Passband's files copied into every folder, relative to the installed ``engine`` package: the sandbox
# (every module of engine/sandbox and engine/sandbox/runtime) and the ``code`` kind with what it imports.
VERIFIER_MODULES = ("verifiers/base.py", "verifiers/kind.py", "verifiers/text.py", "verifiers/kinds/code.py")
PACKAGE_MARKERS = ("__init__.py", "verifiers/__init__.py", "verifiers/kinds/__init__.py")
PACKAGE_MARKER = (
    b'"""Part of Passband\'s engine, copied for this task\'s verifier: only what tests/grade.py needs."""\n'
)
VENDOR_DIR = "tests/passband/engine"

DOCKERFILE = """FROM python:3.11-slim
WORKDIR /app
COPY solution.py /app/solution.py
"""


@functools.cache
def passband_verifier_files() -> dict[str, bytes]:
    """Passband's sandbox and ``code`` kind as they are installed, ``{path in the folder: bytes}``."""
    engine_dir = Path(engine.sandbox.__file__).resolve().parent.parent
    sources = [path.relative_to(engine_dir) for path in sorted((engine_dir / "sandbox").rglob("*.py"))]
    sources += [Path(module) for module in VERIFIER_MODULES]
    files = {f"{VENDOR_DIR}/{source.as_posix()}": (engine_dir / source).read_bytes() for source in sources}
    files.update({f"{VENDOR_DIR}/{marker}": PACKAGE_MARKER for marker in PACKAGE_MARKERS})
    return files


def _where(config: CodeConfig) -> str:
    if config.style == "humaneval":
        start = " It already holds the function's signature and docstring: complete it." if config.code_prefix else ""
        return f"Write your solution in `/app/solution.py`: define `{config.entry_point}`.{start}"
    if config.style == "stdio":
        return (
            "Write your solution in `/app/solution.py`: a program that reads standard input and writes standard output."
        )
    return "Write your solution in `/app/solution.py`."


def code_harbor_folder(
    *, key: str, prompt: str, answer: str, raw_config: Mapping[str, Any], config: CodeConfig
) -> dict[str, bytes]:
    """The files of one Harbor task folder for a ``code`` task, ``{relative path: bytes}``; ``raw_config`` is
    the task's verifier config as stored, ``config`` the same, parsed."""
    limits = config.limits
    files: dict[str, bytes] = {"instruction.md": (prompt.strip() + "\n\n" + _where(config) + "\n").encode()}
    files["task.toml"] = task_toml(
        metadata={
            "passband_key": key,
            "passband_verifier": "code",
            "passband_style": config.style,
            "category": "programming",
            "tags": ["code", "passband"],
        },
        verifier_seconds=limits.wall_seconds * max(len(config.cases), 1) + 60,
        agent_seconds=AGENT_SECONDS,
        memory_mb=max(limits.memory_bytes >> 20, 512),
        storage_mb=2048,
    )
    files["environment/Dockerfile"] = DOCKERFILE.encode()
    files["environment/solution.py"] = config.code_prefix.encode()
    files["tests/test.sh"] = TEST_SH.encode()
    files["tests/grade.py"] = GRADE_PY.encode()
    files.update(passband_verifier_files())
    files["tests/passband/settings.json"] = json.dumps({"max_completion_chars": max_completion_chars()}).encode()
    files["tests/config.json"] = json.dumps({**raw_config, "kind": "code"}, indent=1).encode()
    reference = extract_python_code(answer, entry_point=config.entry_point or None)
    if config.style == "humaneval" and config.code_prefix and not defines_function(reference, config.entry_point):
        reference = config.code_prefix + reference  # a function body: the whole file, as an agent leaves it
    files["solution/solve.sh"] = (
        '#!/bin/bash\nset -e\nmkdir -p "${APP:-/app}"\n'
        "cat > \"${APP:-/app}/solution.py\" <<'PASSBAND_REFERENCE_SOLUTION'\n"
        + reference.rstrip("\n")
        + "\nPASSBAND_REFERENCE_SOLUTION\n"
    ).encode()
    return files
