"""Where the suite's pip finds a plug-in lock's files: the example sheet's lock (texttable, pinned with the
sha256 of its PyPI wheel) is installed from the wheel kept beside the example, with no index, so the suite needs
no network. The same lock installs from PyPI, hashes checked, where an operator's pip uses it."""

from pathlib import Path

SHEET_WHEELS = Path(__file__).resolve().parents[1] / "plugins" / "passband-example-sheet" / "wheels"


def offline_packages_env(cache_dir: Path) -> dict[str, str]:
    """Environment variables under which Passband installs the sheet's lock from SHEET_WHEELS into
    ``cache_dir`` (PASSBAND_CACHE_DIR)."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(SHEET_WHEELS), "PASSBAND_CACHE_DIR": str(cache_dir)}
