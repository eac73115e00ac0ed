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


def mypy(*arguments: str) -> subprocess.CompletedProcess:
    # Configured in pyproject.toml ([tool.mypy]): the engine and the apps' services and selectors.
    return subprocess.run([tool("mypy"), *arguments], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_engine_and_the_service_layers_type_check():
    result = mypy()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_the_type_checker_catches_a_wrong_argument_type_even_in_an_unannotated_function(tmp_path):
    # check_untyped_defs: a service without annotations is checked too.
    program = tmp_path / "caller.py"
    program.write_text(
        "from engine.episodes.drivers import turn_seed\n\n\ndef later():\n    return turn_seed(7, 'first')\n"
    )
    result = mypy(str(program))
    assert result.returncode == 1, result.stdout
    assert 'Argument 2 to "turn_seed" has incompatible type "str"; expected "int"' in result.stdout
