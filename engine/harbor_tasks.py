"""What every Harbor task folder Passband writes shares: its task.toml and the start of tests/test.sh.
Repository tasks: engine/repo_tasks/harbor.py; code tasks: engine/integrations/harbor_code.py."""

from __future__ import annotations

import json
from collections.abc import Mapping

# tests/test.sh's first lines: reward 0 until the grading says otherwise. LOGS overrides /logs/verifier
# (Harbor's verifier folder), so the script runs by hand too.
TEST_SH_HEAD = r"""#!/bin/bash
# {what}
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
{workdir}
LOGS="${LOGS:-/logs/verifier}"
mkdir -p "$LOGS"
echo 0 > "$LOGS/reward.txt"
"""


def test_sh_head(*, what: str, workdir: str) -> str:
    """The head of a tests/test.sh: a comment saying `what` it does, and the `workdir` variable line."""
    return TEST_SH_HEAD.replace("{what}", what).replace("{workdir}", workdir)


def _toml_value(value: str | int | float | list[str]) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(item) for item in value) + "]"
    return json.dumps(value)  # a JSON string or number is a valid TOML value


def task_toml(
    *,
    metadata: Mapping[str, str | list[str]],
    verifier_seconds: float,
    agent_seconds: float,
    memory_mb: int,
    storage_mb: int,
) -> bytes:
    """Harbor's task.toml (schema version 1.0): `metadata` under [metadata], the verifier's and the agent's
    timeouts, one CPU, `memory_mb` and `storage_mb` for the environment."""
    lines = ['version = "1.0"', "", "[metadata]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in metadata.items()]
    lines += [
        "",
        "[verifier]",
        f"timeout_sec = {float(verifier_seconds)}",
        "",
        "[agent]",
        f"timeout_sec = {float(agent_seconds)}",
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        "cpus = 1",
        f"memory_mb = {int(memory_mb)}",
        f"storage_mb = {int(storage_mb)}",
        "",
    ]
    return "\n".join(lines).encode()


def task_toml_with_metadata(toml: bytes, extra: Mapping[str, str]) -> bytes:
    """A task.toml that `task_toml` wrote, with `extra` string fields added at the end of its [metadata]
    table (before the [verifier] table). ValueError when it has no [metadata] table."""
    text = toml.decode()
    head, marker, rest = text.partition("\n[verifier]\n")
    if "\n[metadata]\n" not in head or not marker:
        raise ValueError("task.toml: no [metadata] table followed by [verifier]")
    lines = "".join(f"{key} = {_toml_value(value)}\n" for key, value in extra.items())
    return (head.rstrip("\n") + "\n" + lines + marker + rest).encode()
