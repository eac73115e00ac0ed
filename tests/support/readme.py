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


def run_readme_python(containing: str, **names) -> dict:
    """Run that block with `names` defined; returns its namespace."""
    namespace = dict(names)
    exec(compile(readme_python(containing), str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    return namespace
