"""Shared setup for the episode tests: offline Hugging Face, the repository root importable, and the
sandbox in the isolation the rest of the suite uses."""

import os
import sys
from importlib import metadata
from pathlib import Path

import pytest

from engine.episodes import plugins

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

_REPOSITORY_ROOT = str(Path(__file__).resolve().parents[3])
if _REPOSITORY_ROOT not in sys.path:
    sys.path.insert(0, _REPOSITORY_ROOT)

from tests.support.plugin_packages import offline_packages_env  # noqa: E402 - after the root is importable

BROKEN = "tests.engine.episodes.broken_plugins"
SHEET_PACKAGE = Path(_REPOSITORY_ROOT) / "tests" / "plugins" / "passband-example-sheet"


def entry_point(name, module):
    return metadata.EntryPoint(name=name, value=f"{BROKEN}.{module}", group=plugins.GROUP)


@pytest.fixture
def with_plugins(monkeypatch):
    """Discovery over the installed plug-ins plus these test modules (real EntryPoint objects)."""

    def install(**modules):
        points = [*metadata.entry_points(group=plugins.GROUP), *(entry_point(n, m) for n, m in modules.items())]
        found = plugins.discover_from(points)
        monkeypatch.setattr(plugins, "discover", lambda: found)
        return found

    yield install


@pytest.fixture
def sheet(monkeypatch, tmp_path_factory):
    """Discovery over the installed plug-ins plus the example stateful class `sheet`
    (tests/plugins/passband-example-sheet, a real EntryPoint naming its class); its lock is installed, on first
    use, into a package cache shared by the session's tests, from the wheel beside the example."""
    for name, value in offline_packages_env(tmp_path_factory.getbasetemp() / "package-cache").items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(SHEET_PACKAGE))
    point = metadata.EntryPoint(name="sheet", value="passband_sheet:SheetWorld", group=plugins.GROUP)
    found = plugins.discover_from([*metadata.entry_points(group=plugins.GROUP), point])
    monkeypatch.setattr(plugins, "discover", lambda: found)
    assert "sheet" in found.plugins, found.refused
    return found.plugins["sheet"]
