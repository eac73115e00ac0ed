"""The layout's rules, checked on every run: dependencies one way, no Django in the engine."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_imports_follow_the_layers():
    # Contracts in pyproject.toml: web | api -> releases -> calibration -> curation -> accounts -> engine.
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_lint_is_clean():
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ruff")), "check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:]
