"""Trainers install the engine: the packages the build configuration ships carry it whole and none of the
Django apps, and the README's trainer snippet runs from those packages alone outside the repository
(verifiers, the sandbox, stats). The wheel itself is built and checked by `make test`'s check step
(scripts/check_wheel.py), outside pytest."""

import shutil
import tomllib
from pathlib import Path

from setuptools import find_packages

from scripts.check_wheel import NEEDED, NOT_SHIPPED, snippet_failure

ROOT = Path(__file__).resolve().parents[2]


def shipped_packages() -> list[str]:
    """The packages setuptools puts in the wheel, read from pyproject.toml's [tool.setuptools.packages.find]."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return find_packages(where=str(ROOT), include=found["include"])


def test_the_build_ships_the_engine_whole_and_no_app():
    packages = shipped_packages()
    files = {
        path.relative_to(ROOT).as_posix()
        for package in packages
        for path in (ROOT / package.replace(".", "/")).iterdir()
        if path.is_file()
    }
    assert set(NEEDED) <= files
    assert not [name for name in files if name.startswith(NOT_SHIPPED)]
    assert {package.split(".")[0] for package in packages} == {"engine", "passband_release"}
    # Every engine package is shipped: a new sub-package without __init__.py would be left out of the wheel.
    on_disk = {p.parent.relative_to(ROOT).as_posix().replace("/", ".") for p in (ROOT / "engine").rglob("*.py")}
    assert on_disk <= set(packages)


def test_the_snippet_runs_from_the_shipped_packages_outside_the_repository(tmp_path):
    site = tmp_path / "site"
    for package in shipped_packages():
        if "." not in package:
            shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert snippet_failure(site, tmp_path / "elsewhere") is None
