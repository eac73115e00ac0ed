"""Code tasks (the ``code`` verifier: humaneval, asserts and stdio styles) as Harbor task folders.

    instruction.md            the prompt, and where the program goes (/app/solution.py)
    task.toml                 Harbor's task config: [metadata] passband_key, passband_verifier, passband_style;
                              the verifier's and the agent's timeouts; the environment's memory
    environment/Dockerfile    a plain Python image; /app/solution.py starts as the task's code_prefix
    environment/solution.py   that starting file (the function's signature and docstring, or empty)
    tests/test.sh             runs tests/grade.py, which writes 1 or 0 to /logs/verifier/reward.txt
    tests/grade.py            the same rules as Passband's ``code`` verifier, standard library only
    tests/config.json         the task's verifier config
    solution/solve.sh         writes the reference answer to /app/solution.py (Harbor's oracle agent)

What does not travel: Passband's sandbox (Harbor's container is the isolation; the limits there are the
container's, and the program's wall-clock limit per run), extraction of code from a chat reply (the agent
writes the file itself). ``APP`` and ``LOGS`` override /app and /logs/verifier, so the verifier runs by
hand too (tests/curation/test_harbor_export.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.harbor_tasks import task_toml, test_sh_head
from engine.verifiers.kinds.code import CodeConfig
from engine.verifiers.text import defines_function, extract_python_code

AGENT_SECONDS = 900.0

TEST_SH = (
    test_sh_head(
        what="Passband code task verifier (Harbor): grade /app/solution.py against the task's tests.",
        workdir='APP="${APP:-/app}"',
    )
    + r"""python3 "$HERE/grade.py" "$APP/solution.py" > "$LOGS/reward.txt"
cat "$LOGS/reward.txt"
"""
)

GRADE_PY = r'''"""Passband code task grading inside a Harbor container (standard library only): the rules of
Passband's `code` verifier. Prints the reward, 1 or 0; the reason goes to stderr."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = json.load(open(os.path.join(HERE, "config.json")))
TIMEOUT = float(CONFIG.get("timeout_seconds", 10))


def defines(code, name):
    return re.search(r"^(?:async[ \t]+)?def[ \t]+%s[ \t]*\(" % re.escape(name), code, re.MULTILINE) is not None


def run(source, stdin=""):
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", source], input=stdin, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return None, "wall-clock limit of %gs exceeded" % TIMEOUT
    return done, done.stderr.strip().splitlines()[-1:] or [""]


def lines(text):
    found = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while found and not found[-1]:
        found.pop()
    return found


def matches(got, expected, mode):
    if mode == "exact":
        return got == expected
    if mode == "tokens":
        return got.split() == expected.split()
    return lines(got) == lines(expected)


def grade(code):
    if not code.strip():
        return 0, "empty program"
    style = CONFIG["style"]
    if style == "humaneval":
        prefix, entry = CONFIG.get("code_prefix", ""), CONFIG["entry_point"]
        program = prefix.rstrip("\n") + "\n\n\n" + code if prefix and defines(code, entry) else prefix + code
        done, why = run(program + "\n\n" + CONFIG["test"] + "\n\ncheck(" + entry + ")\n")
    elif style == "asserts":
        parts = [code, CONFIG.get("setup", "")] + list(CONFIG["asserts"])
        done, why = run("\n\n".join(part for part in parts if part) + "\n")
    else:
        for number, case in enumerate(CONFIG["cases"], start=1):
            done, why = run(code, case["input"])
            if done is None or done.returncode != 0:
                return 0, "case %d: %s" % (number, why)
            if not matches(done.stdout, case["output"], CONFIG.get("compare", "lines")):
                return 0, "case %d: expected %r, got %r" % (number, case["output"][:60], done.stdout[:60])
        return 1, "all %d cases passed" % len(CONFIG["cases"])
    if done is None or done.returncode != 0:
        return 0, str(why)
    return 1, "all tests passed"


if __name__ == "__main__":
    try:
        source = open(sys.argv[1], encoding="utf-8").read()
    except OSError as error:
        source, reason = "", str(error)
    reward, reason = grade(source)
    print(reason, file=sys.stderr)
    print(reward)
'''

DOCKERFILE = """FROM python:3.11-slim
WORKDIR /app
COPY solution.py /app/solution.py
"""


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
