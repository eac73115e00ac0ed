"""The layout's rules, checked on every run: dependencies one way, no Django in the engine, lint and format."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_imports_follow_the_layers():
    # Contracts in pyproject.toml: web | api -> releases -> calibration -> curation -> accounts -> engine.
    result = subprocess.run([tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("command", [["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]])
def test_lint_and_format_are_clean(command):
    result = subprocess.run([tool("ruff"), *command], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
