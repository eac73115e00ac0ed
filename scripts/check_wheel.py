"""Trainers install the engine: build the wheel from this checkout, check that it carries the engine whole and
none of the Django apps, and run the README's trainer snippet from it outside the repository (verifiers, the
sandbox, stats). A step of `make test` (scripts/check.sh); exits non-zero with the reason on failure.

    .venv/bin/python scripts/check_wheel.py
"""

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SNIPPET = """
from engine.verifiers import verify
from engine import stats

assert verify(verifier={"kind": "math"}, completion="So the answer is \\\\boxed{42}.", answer="42").outcome == "pass"
code = {"kind": "code", "style": "asserts", "asserts": ["assert add(2, 3) == 5"]}
assert verify(verifier=code, completion="def add(a, b):\\n    return a + b\\n").outcome == "pass"
assert verify(verifier=code, completion="def add(a, b):\\n    return 0\\n").outcome == "fail"
from engine import quality_card
assert quality_card.schema()["$id"].endswith("/1.1.0.json")
print(stats.Band.IN_BAND, "ok")
"""

NEEDED = (
    "engine/verifiers/__init__.py",
    "engine/verifiers/math_worker.py",
    "engine/sandbox/server.py",
    "engine/sandbox/runtime/judge.py",
    "engine/stats/__init__.py",
    "engine/formats/__init__.py",
    "engine/formats/registry.py",
    "engine/worlds/registry.py",
    "engine/quality_card.schema.json",
)
NOT_SHIPPED = (
    "accounts/", "api/", "calibration/", "curation/", "releases/", "review/", "similarity/", "web/", "tests/",
)  # fmt: skip


def build_wheel(scratch: Path) -> Path:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = scratch / "source"
    ignored = shutil.ignore_patterns(".git", ".venv", "var", "test-results", "__pycache__", "node_modules")
    shutil.copytree(ROOT, source, ignore=ignored)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(scratch), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = scratch.glob("passband-*.whl")
    return wheel


def snippet_failure(site: Path, outside: Path) -> str | None:
    """Run SNIPPET with the engine from `site` only, in the empty folder `outside`; None if it ran, else its
    error output."""
    outside.mkdir()
    # The dependencies come from this environment; the engine only from `site` (-I: no cwd, no PYTHONPATH).
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); " + SNIPPET],
        cwd=outside,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode == 0 and "in_band ok" in result.stdout:
        return None
    return result.stderr[-3000:] or result.stdout[-3000:]


def problems_of(wheel: Path, scratch: Path) -> list[str]:
    """What is wrong with `wheel`: files missing or shipped by mistake, or the snippet failing from it."""
    names = set(zipfile.ZipFile(wheel).namelist())
    problems = [f"{wheel.name} lacks {name}" for name in NEEDED if name not in names]
    problems += [f"{wheel.name} ships {name}" for name in sorted(names) if name.startswith(NOT_SHIPPED)]
    site = scratch / "site"
    zipfile.ZipFile(wheel).extractall(site)
    if failure := snippet_failure(site, scratch / "elsewhere"):
        problems.append(f"the README's trainer snippet failed from the wheel:\n{failure}")
    return problems


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="passband-wheel-") as directory:
        scratch = Path(directory)
        wheel = build_wheel(scratch)
        problems = problems_of(wheel, scratch)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"{wheel.name}: the engine whole, no app, the trainer snippet runs from it")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
