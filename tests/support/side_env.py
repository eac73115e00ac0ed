"""Side virtualenvs for frameworks that need a newer Python than Passband's (scripts/side-env.sh)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def side_python(name: str) -> str:
    """The python of side environment `name` (nemo-gym, harbor), built once and cached outside the clone.
    The only skip: no Python 3.12 interpreter on this machine."""
    found = subprocess.run(
        [str(ROOT / "scripts" / "side-env.sh"), "python", name], capture_output=True, text=True, timeout=1800
    )
    if found.returncode == 3:
        pytest.skip(f"{name} needs Python 3.12: {found.stderr.strip()}")
    assert found.returncode == 0, found.stderr
    return found.stdout.strip().splitlines()[-1]


def run_side_command(python: str, line: str, *, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run a shell command `line` (a framework's own command, as the README writes it) with the side
    environment of `python` first on PATH."""
    return subprocess.run(
        ["bash", "-c", f"PATH={shlex.quote(str(Path(python).parent))}:$PATH {line}"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
