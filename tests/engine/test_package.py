"""Trainers install the engine: the wheel built from this repository carries it whole, and the
README's trainer snippet runs from it outside the repository (verifiers, the sandbox, stats)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """
from engine.verifiers import verify
from engine import stats

assert verify(verifier={"kind": "math"}, completion="So the answer is \\\\boxed{42}.", answer="42").outcome == "pass"
code = {"kind": "code", "style": "asserts", "asserts": ["assert add(2, 3) == 5"]}
assert verify(verifier=code, completion="def add(a, b):\\n    return a + b\\n").outcome == "pass"
assert verify(verifier=code, completion="def add(a, b):\\n    return 0\\n").outcome == "fail"
from engine import quality_card
assert quality_card.schema()["$id"].endswith("/1.0.0.json")
print(stats.Band.IN_BAND, "ok")
"""


def test_the_wheel_carries_the_engine_and_the_snippet_runs_from_it(tmp_path):
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "var", "test-results", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(tmp_path), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("passband-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "engine/verifiers/__init__.py",
        "engine/verifiers/math_worker.py",
        "engine/sandbox/server.py",
        "engine/sandbox/runtime/judge.py",
        "engine/stats/__init__.py",
        "engine/formats.py",
        "engine/quality_card.schema.json",
    ):
        assert needed in names
    assert not [name for name in names if name.startswith(("calibration/", "curation/", "web/", "tests/"))]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # The dependencies come from this environment; the engine only from the wheel (-I: no cwd, no PYTHONPATH).
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); " + SNIPPET],
        cwd=outside,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "in_band ok" in result.stdout
