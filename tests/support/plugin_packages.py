"""Where the suite's pip finds a plug-in lock's files: the example sheet's lock (texttable, pinned with the
sha256 of its PyPI wheel) is installed from the wheel kept beside the example, with no index, so the suite needs
no network. The same lock installs from PyPI, hashes checked, where an operator's pip uses it."""

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "plugins"
SHEET_WHEELS = EXAMPLES / "passband-example-sheet" / "wheels"


def offline_packages_env(cache_dir: Path) -> dict[str, str]:
    """Environment variables under which Passband installs the sheet's lock from SHEET_WHEELS into
    ``cache_dir`` (PASSBAND_CACHE_DIR)."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(SHEET_WHEELS), "PASSBAND_CACHE_DIR": str(cache_dir)}


def example_installed(monkeypatch, tmp_path: Path, name: str, entry_points: dict[str, str]) -> str:
    """The example package tests/plugins/`name` installed the way a package is, for this process and for workers:
    a dist-info of distribution `name` on a folder of its own under `tmp_path` declaring `entry_points` (name ->
    "module[:attribute]") under the environments' entry point group, both folders on this process's path, and
    discovery refreshed (refresh it again when done). Returns the PYTHONPATH a worker needs to see it."""
    from engine.episodes import plugins

    example = EXAMPLES / name
    monkeypatch.syspath_prepend(str(example))
    site = declared_installed(monkeypatch, tmp_path, name, entry_points)
    plugins.refresh()
    return f"{site}:{example}:{EXAMPLES.parents[1]}"


def declared_installed(monkeypatch, tmp_path: Path, distribution: str, entry_points: dict[str, str]) -> Path:
    """A dist-info of `distribution` declaring `entry_points` (name -> "module[:attribute]") under the environments'
    entry point group, on a folder of its own under `tmp_path` put on this process's path, as installing the
    package would; the folder (with the checkout, the PYTHONPATH a worker needs to see it). Refresh the registry
    that reads the group before and after."""
    site = tmp_path / "site"
    info = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n")
    declared = "".join(f"{entry} = {value}\n" for entry, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[passband.environments]\n{declared}")
    monkeypatch.syspath_prepend(str(site))
    return site
