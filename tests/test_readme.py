"""The README as written: every fenced block, extracted from README.md (not copied here), is checked.

- python blocks compile, and json blocks parse;
- every shell line is valid shell (bash -n), and every `manage.py` command in it names a command that
  exists with arguments its own parser accepts;
- the commands a newcomer runs first run for real, as written, on the demo data (`load_demo`), in a
  subprocess with the environment the README's setup block gives (DEBUG=1, no SECRET_KEY).

What a block needs from elsewhere (a GPU server, the network, Docker, files the reader makes) is not
run here; the tests named in the README run those with their own servers (tests/support/readme.py).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

from tests.support.workers import test_database_url

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
LANGUAGES = {"sh", "python", "json", "text"}


def blocks() -> list[tuple[int, str, str]]:
    """(line, language, body) of every fenced block of the README."""
    text = README.read_text()
    return [(text[: m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def shell_commands(body: str) -> list[str]:
    """A shell block's commands: continuation lines joined, comments dropped."""
    joined = body.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
            commands.append(line)
    return commands


def manage_py_argv(command: str) -> list[str] | None:
    """The arguments after `manage.py` when the command runs it, else None."""
    words = shlex.split(command)
    for index, word in enumerate(words):
        if word.endswith("manage.py"):
            return words[index + 1 :]
    return None


def test_every_block_names_its_language_and_the_python_and_json_ones_parse():
    found = blocks()
    assert len(found) > 20
    for line, language, body in found:
        assert language in LANGUAGES, f"README.md line {line}: a block without a known language ({language!r})"
        if language == "python":
            ast.parse(body, filename=f"README.md:{line}")
        elif language == "json":
            json.loads(body)


def test_every_shell_line_is_valid_and_every_manage_py_command_parses():
    commands = [
        (line, command) for line, language, body in blocks() if language == "sh" for command in shell_commands(body)
    ]
    assert any(manage_py_argv(command) for _, command in commands)
    known = get_commands()
    for line, command in commands:
        checked = subprocess.run(["bash", "-n"], input=command, capture_output=True, text=True)
        assert checked.returncode == 0, f"README.md line {line}: {command}\n{checked.stderr}"
        argv = manage_py_argv(command)
        if argv is None:
            continue
        name, *arguments = argv
        assert name in known, f"README.md line {line}: no manage.py command {name!r}"
        parser = load_command_class(known[name], name).create_parser("manage.py", name)
        try:
            parser.parse_args(arguments)
        except SystemExit:
            pytest.fail(f"README.md line {line}: manage.py {name} refuses {arguments}")


def _readme_env() -> dict[str, str]:
    """The README's setup block, applied: its exports, over an environment without SECRET_KEY."""
    setup = next(body for _, language, body in blocks() if language == "sh" and "export DEBUG=" in body)
    env = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "DEBUG")}
    for command in shell_commands(setup):
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            env[name] = value
    return {**env, "DATABASE_URL": test_database_url(), "PYTHONPATH": str(ROOT)}


def _run_readme_line(containing: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the README's one shell line containing `containing`, as written, with `python` the virtualenv's."""
    [command] = [
        c for _, language, body in blocks() if language == "sh" for c in shell_commands(body) if containing in c
    ]
    argv = shlex.split(command)
    argv[0] = sys.executable if argv[0] in ("python", ".venv/bin/python") else argv[0]
    argv = [str(ROOT / "manage.py") if word == "manage.py" else word for word in argv]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.django_db(transaction=True)
def test_the_first_commands_run_as_written_on_the_demo_data(tmp_path, media):
    env = _readme_env()
    assert env.get("DEBUG") == "1" and "SECRET_KEY" not in env
    demo = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "load_demo"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    token = _run_readme_line("create_api_token", env, tmp_path)
    assert token.returncode == 0, token.stderr
    assert re.search(r"pb_\w+", token.stdout), token.stdout
    harbor = _run_readme_line("export_harbor", env, tmp_path)
    assert harbor.returncode == 0, harbor.stderr
    assert (tmp_path / "harbor").is_dir() and any((tmp_path / "harbor").iterdir())
