"""A plug-in's own packages (engine/episodes/plugin_packages.py, engine/sandbox/package_environments.py): its
lock is validated at discovery, installed hash-pinned into a folder of its own once per host (concurrent
installers wait for one another, a failed install is never taken for done), and its sandbox sees that folder's
packages, not Passband's. pip installs from the wheel kept beside the example (no index, no network)."""

import hashlib
import json
import threading
from pathlib import Path

import pytest

from engine.episodes.stateful import StatefulWorld
from engine.sandbox import package_environments
from engine.sandbox.package_environments import InstallFailed, LockError, read_lock
from engine.sandbox.view import SandboxView, sandbox_for
from tests.support.plugin_packages import SHEET_WHEELS, offline_packages_env

WHEEL = SHEET_WHEELS / "texttable-1.7.0-py2.py3-none-any.whl"


def write_lock(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requirements.lock").write_text(text)
    return folder / "requirements.lock"


def pinned(digest: str) -> str:
    return f"# what the tools need\ntexttable==1.7.0 \\\n    --hash=sha256:{digest}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("texttable>=1.7\n", r"requirements.lock, line 1: 'texttable>=1.7' must be pinned as name==version"),
        ("# c\n\ntexttable==1.7.0\n", r"line 3: texttable needs --hash=sha256:<64 hex digits>"),
        ("texttable==1.7.0 --hash=md5:abc\n", r"line 1: texttable needs --hash=sha256"),
        ("--index-url https://example.org/simple\n", r"line 1: --index-url is not allowed in a lock"),
        ("# nothing\n", r"names no requirement"),
    ],
)
def test_a_lock_that_is_not_pinned_with_hashes_is_refused_naming_its_line(tmp_path, text, message):
    with pytest.raises(LockError, match=message):
        read_lock(write_lock(tmp_path, text))


def test_a_lock_installs_once_per_host_and_concurrent_installers_share_it(tmp_path, monkeypatch):
    for name, value in offline_packages_env(tmp_path / "cache").items():
        monkeypatch.setenv(name, value)
    lock = read_lock(write_lock(tmp_path / "plugin", pinned(hashlib.sha256(WHEEL.read_bytes()).hexdigest())))
    assert lock.requirements == ("texttable==1.7.0",) and package_environments.installed_site(lock) is None
    sites: list[Path] = []
    racers = [threading.Thread(target=lambda: sites.append(package_environments.install(lock))) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    folder = package_environments.folder_of(lock)
    assert sites == [folder / "site"] * 2 and (folder / "site" / "texttable.py").is_file()
    assert folder.parent == tmp_path / "cache" / "package-environments" and lock.sha256[:24] in folder.name
    assert [path.name for path in folder.parent.iterdir() if "partial" in path.name] == []
    record = json.loads((folder / "installed.json").read_text())
    assert record["sha256"] == lock.sha256 and record["requirements"] == ["texttable==1.7.0"]
    # Present: no pip this time (a lock file pip could not read would fail it).
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    assert package_environments.install(lock) == folder / "site"


def test_a_file_whose_hash_differs_fails_the_install_and_leaves_nothing_marked_done(tmp_path, monkeypatch):
    for name, value in offline_packages_env(tmp_path / "cache").items():
        monkeypatch.setenv(name, value)
    lock = read_lock(write_lock(tmp_path / "plugin", pinned("0" * 64)))
    with pytest.raises(InstallFailed, match="pip could not install requirements.lock .texttable==1.7.0.: .*HASH"):
        package_environments.install(lock)
    assert package_environments.installed_site(lock) is None
    assert [path.name for path in (tmp_path / "cache" / "package-environments").iterdir()] == [f"{lock.key}.lock"]


def test_the_sheets_tools_use_its_locked_package_and_its_sandbox_sees_no_passband_package(sheet):
    assert sheet.lock is not None and sheet.lock.requirements == ("texttable==1.7.0",)
    world = StatefulWorld(environment="sheet", seed=2)
    try:
        world.reset()
        result = world.call("render", {})
    finally:
        world.close()
    assert result.status == "ok", result.content
    rendered = json.loads(result.content)
    assert "| A1   | 2     |" in rendered["table"]
    site = package_environments.installed_site(sheet.lock)
    assert site is not None and (site / "texttable.py").is_file()
    if sandbox_for(SandboxView.of()).isolation()["mode"] == "namespaces":
        assert rendered["texttable"] == "/passband-packages/texttable.py"


def test_a_plugin_whose_lock_is_not_pinned_with_hashes_is_refused_at_discovery(with_plugins):
    found = with_plugins(bad_lock="bad_lock")
    refused = next(item for item in found.refused if item.name == "bad_lock")
    assert "bad_lock" not in found.plugins
    assert refused.error == (
        "tests.engine.episodes.broken_plugins.bad_lock.REQUIREMENTS: bad_lock.txt, line 2: 'texttable>=1.7' must be "
        "pinned as name==version, e.g. texttable==1.7.0"
    )


def test_a_cache_that_cannot_be_written_is_a_failed_install_not_a_crash(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("PASSBAND_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    lock = read_lock(write_lock(tmp_path / "plugin", pinned("0" * 64)))
    with pytest.raises(
        InstallFailed, match="cannot install requirements.lock under .*a-file/cache/package-environments"
    ):
        package_environments.install(lock)
