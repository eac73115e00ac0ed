"""The documentation's code examples, for the tests that run them: the README and docs/*.md show the code a
test runs. An example is found by a string it contains, which must name exactly one block (or shell line) in
all of the documentation, so a test cannot run a copy while the page shows another."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = (README, *sorted((ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# The line right above a block that is only checked, never run: it needs what the suite has not (a GPU server,
# the network, Docker) or runs until stopped. The reason is said in the comment.
SYNTAX_ONLY = re.compile(r"^<!-- syntax only: (.+?) -->\n$")


def fenced_blocks(document: Path) -> list[tuple[int, str, str]]:
    """(line, language, body) of every fenced block of `document`, in order."""
    text = document.read_text()
    return [(text[: m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def readme_blocks() -> list[tuple[int, str, str, str | None]]:
    """(line, language, body, why it is only checked or None) of every fenced block of the README, in order."""
    lines = README.read_text().splitlines(keepends=True)
    found = []
    for line, language, body in fenced_blocks(README):
        above = SYNTAX_ONLY.match(lines[line - 2]) if line >= 2 else None
        found.append((line, language, body, above[1] if above else None))
    return found


def _name(document: Path) -> str:
    return str(document.relative_to(ROOT))


def readme_python(containing: str) -> str:
    """The documentation's one ```python block that contains `containing` (AssertionError unless exactly one)."""
    found = [
        (document, body)
        for document in DOCUMENTS
        for _, language, body in fenced_blocks(document)
        if language == "python" and containing in body
    ]
    where = [_name(document) for document, _ in found]
    assert len(found) == 1, f"the documentation has {len(found)} python blocks containing {containing!r}: {where}"
    return found[0][1]


def _document_of(block: str) -> Path:
    return next(document for document in DOCUMENTS if block in document.read_text())


def run_readme_python(containing: str, *, address: tuple[str, str] | None = None, **names) -> dict:
    """Run that block with `names` defined; returns its namespace. `address`, (as written, where the test
    serves it), replaces a server's address the block names, the block's only change."""
    source = readme_python(containing)
    document = _document_of(source)
    if address is not None:
        assert address[0] in source, f"the block of {_name(document)} names no {address[0]}"
        source = source.replace(*address)
    namespace = dict(names)
    exec(compile(source, str(document), "exec"), namespace)  # noqa: S102 - the documentation's own code
    return namespace


def readme_shell_line(containing: str) -> str:
    """The documentation's one line of a ```sh block that contains `containing`, without its trailing comment."""
    found = [
        (document, line)
        for document in DOCUMENTS
        for _, language, body in fenced_blocks(document)
        if language == "sh"
        for line in body.splitlines()
        if containing in line
    ]
    where = [_name(document) for document, _ in found]
    assert len(found) == 1, f"the documentation has {len(found)} shell lines containing {containing!r}: {where}"
    return re.sub(r"\s+#\s.*$", "", found[0][1])
