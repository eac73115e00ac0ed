"""The README and docs/*.md as written: every fenced block, extracted from the pages (not copied here), is
checked, and every relative link resolves.

- python blocks compile, and json blocks parse; every block of the README names its language;
- every shell line is valid shell (bash -n), and every `manage.py` command in it names a command that
  exists with arguments its own parser accepts (a synopsis's `[optional]` parts left out);
- every README block marked `<!-- syntax only: why -->` is still checked here (tests/test_readme_runs.py runs
  every other block of the README, in order, on the demo data);
- every link to a file of the checkout names one that exists, and a `#heading` in it names a heading
  of that page (GitHub's anchors).

What a block needs from elsewhere (a GPU server, the network, Docker, files the reader makes) is not
run here; the tests docs/trainers.md names run those with their own servers (tests/support/readme.py).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, get_commands, load_command_class

from tests.support.readme import DOCUMENTS, README, ROOT, SYNTAX_ONLY, fenced_blocks

LANGUAGES = {"sh", "python", "json", "text"}
SYNOPSIS_OPTION = re.compile(r"\s\[[^\[\]]*\]")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _name(document: Path) -> str:
    return str(document.relative_to(ROOT))


def documents_with(language: str) -> list[Path]:
    return [document for document in DOCUMENTS if any(lang == language for _, lang, _ in fenced_blocks(document))]


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
    """The arguments after `manage.py` when the command runs it, else None; `[optional]` synopsis parts dropped."""
    words = shlex.split(SYNOPSIS_OPTION.sub("", command))
    for index, word in enumerate(words):
        if word.endswith("manage.py"):
            return words[index + 1 :]
    return None


def test_every_readme_block_names_its_language():
    found = fenced_blocks(README)
    assert len(found) > 8
    for line, language, _ in found:
        assert language in LANGUAGES, f"README.md line {line}: a block without a known language ({language!r})"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_python_and_json_blocks_parse(document):
    for line, language, body in fenced_blocks(document):
        if language == "python":
            ast.parse(body, filename=f"{_name(document)}:{line}")
        elif language == "json":
            try:
                json.loads(body)
            except json.JSONDecodeError as error:
                pytest.fail(f"{_name(document)} line {line}: {error}")


@pytest.mark.parametrize("document", documents_with("sh"), ids=_name)
def test_every_shell_line_is_valid_and_every_manage_py_command_parses(document):
    commands = [
        (line, command)
        for line, language, body in fenced_blocks(document)
        if language == "sh"
        for command in shell_commands(body)
    ]
    known = get_commands()
    for line, command in commands:
        where = f"{_name(document)} line {line}"
        checked = subprocess.run(["bash", "-n"], input=command, capture_output=True, text=True)
        assert checked.returncode == 0, f"{where}: {command}\n{checked.stderr}"
        argv = manage_py_argv(command)
        if argv is None:
            continue
        name, *arguments = argv
        assert name in known, f"{where}: no manage.py command {name!r}"
        parser = load_command_class(known[name], name).create_parser("manage.py", name)
        try:
            parser.parse_args(arguments)
        except (SystemExit, CommandError) as error:
            pytest.fail(f"{where}: manage.py {name} refuses {arguments}: {error}")


def test_the_readme_and_the_docs_run_manage_py():
    assert any(
        manage_py_argv(command)
        for document in (README, *documents_with("sh"))
        for _, language, body in fenced_blocks(document)
        if language == "sh"
        for command in shell_commands(body)
    )


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    """Every heading anchor of `document` (outside fenced blocks), a repeated one numbered as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for match in re.finditer(r"^#{1,6} (.+)$", _prose(document, keep_code=True), re.MULTILINE):
        name = anchor(match.group(1))
        found.add(f"{name}-{seen[name]}" if name in seen else name)
        seen[name] = seen.get(name, 0) + 1
    return found


def _prose(document: Path, *, keep_code: bool = False) -> str:
    """`document` without its fenced blocks, and without inline code unless `keep_code` (a link in code is an
    example, not a link; a heading's code is part of its anchor)."""
    text = re.sub(r"^```.*?^```", "", document.read_text(), flags=re.DOTALL | re.MULTILINE)
    return text if keep_code else re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_every_relative_link_resolves(document):
    for target in LINK.findall(_prose(document)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, heading = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        assert linked.exists(), f"{_name(document)}: {target} names no file"
        if heading and linked.suffix == ".md":
            assert heading in anchors(linked), f"{_name(document)}: {target} names no heading of {linked.name}"


def test_every_syntax_only_mark_stands_right_above_a_block():
    lines = README.read_text().splitlines()
    marked = [index for index, line in enumerate(lines) if line.startswith("<!-- syntax only")]
    assert marked, "the README marks the blocks the suite cannot run"
    for index in marked:
        assert SYNTAX_ONLY.match(lines[index] + "\n"), f"README.md line {index + 1}: write <!-- syntax only: why -->"
        assert lines[index + 1].startswith("```"), f"README.md line {index + 1}: a syntax-only mark above no block"
