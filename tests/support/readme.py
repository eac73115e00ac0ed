"""The README's code examples, for the tests that run them: the README shows the code a test runs."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_python(containing: str) -> str:
    """The README's ```python block that contains `containing` (AssertionError when there is none)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    found = [block for block in blocks if containing in block]
    assert len(found) == 1, f"README.md has {len(found)} python blocks containing {containing!r}"
    return found[0]


def run_readme_python(containing: str, *, address: tuple[str, str] | None = None, **names) -> dict:
    """Run that block with `names` defined; returns its namespace. `address`, (as written, where the test
    serves it), replaces a server's address the README names, the block's only change."""
    source = readme_python(containing)
    if address is not None:
        assert address[0] in source, f"the README's block names no {address[0]}"
        source = source.replace(*address)
    namespace = dict(names)
    exec(compile(source, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    return namespace


def readme_shell_line(containing: str) -> str:
    """The one line of the README's ```sh blocks that contains `containing`, without its trailing comment."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.DOTALL)
    found = [line for block in blocks for line in block.splitlines() if containing in line]
    assert len(found) == 1, f"README.md has {len(found)} shell lines containing {containing!r}"
    return re.sub(r"\s+#\s.*$", "", found[0])
