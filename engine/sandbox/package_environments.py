"""Package environments: a plug-in's own dependencies, installed hash-pinned into a folder of their own that its
sandbox sees, never into Passband's interpreter and never mixed with its packages.

A lock is a pip requirements file in which every requirement is pinned (``name==version``) and carries the
sha256 of each file it may install (``--hash=sha256:...``), every dependency of a dependency included:

    texttable==1.7.0 \\
        --hash=sha256:72227d592c82b3d7f672731ae73e4d1f88cd8e2ef5b075a7a7f01a23a3743917

``read_lock`` validates one (a ``LockError`` names the file, the line and what to write instead). ``install``
installs it with ``pip install --require-hashes --only-binary :all: --target``: wheels only, so nothing of the
packages runs at install time; a file whose hash differs is refused by pip. The folder is named by the lock's
sha256 (and the Python it is for) under the cache Passband builds things in (``PASSBAND_CACHE_DIR``, else
``$XDG_CACHE_HOME/passband``, else ``~/.cache/passband``), so every lock is installed once per host, and a changed
lock is a new folder. Installing is idempotent and safe to race: one installer at a time per lock (a file lock),
into a scratch folder renamed into place only when pip succeeded, so a failed install is never taken for done.
Where pip finds the files is pip's own configuration (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_NO_INDEX``):
an operator's mirror works as it does for pip.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

INSTALL_SECONDS = 600.0
FOLDER = "package-environments"
SITE = "site"
RECORD = "installed.json"
PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]*\])?==([A-Za-z0-9.+!_-]+)(\s*;.*)?$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")
HASH_PREFIX = 12  # hex digits of a file's sha256 shown where a lock is listed


class LockError(ValueError):
    """A lock that cannot be used; the message names the file, the line and what to write instead."""


class InstallFailed(RuntimeError):
    """pip could not install a lock on this host; the message carries the end of pip's output."""


@dataclass(frozen=True)
class LockedPackage:
    """One requirement of a lock: its name, the version pinned, and the sha256 of each file it may install."""

    name: str
    version: str
    hashes: tuple[str, ...]

    def hash_prefixes(self, length: int = HASH_PREFIX) -> tuple[str, ...]:
        """Each hash's first ``length`` hex digits: enough to tell the files apart on a page."""
        return tuple(digest[:length] for digest in self.hashes)


@dataclass(frozen=True)
class Lock:
    """A validated lock: its file, its sha256, the pinned requirements it names ("name==version"), and each of
    them with its hashes (``packages``)."""

    path: Path
    sha256: str
    requirements: tuple[str, ...]
    packages: tuple[LockedPackage, ...] = ()

    @property
    def key(self) -> str:
        """The name of its folder: the lock's hash and the Python the wheels are for."""
        return f"{self.sha256[:24]}-py{sys.version_info.major}{sys.version_info.minor}"


def read_lock(path: Path) -> Lock:
    """The lock at ``path``; raises LockError naming the file and line of the first problem."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise LockError(f"{path}: cannot be read ({error.strerror or error}); ship it inside the package") from None
    requirements: list[str] = []
    packages: list[LockedPackage] = []
    for number, line in _logical_lines(data.decode("utf-8", "replace")):
        parts = line.split()
        where = f"{path.name}, line {number}"
        if parts[0].startswith("-"):
            raise LockError(
                f"{where}: {parts[0]} is not allowed in a lock; list pinned requirements only (the index is the "
                "operator's pip configuration: pip-compile --no-emit-index-url leaves it out)"
            )
        requirement = " ".join(part for part in parts if not part.startswith("--hash"))
        found = PINNED.match(requirement)
        if found is None:
            raise LockError(f"{where}: {requirement!r} must be pinned as name==version, e.g. texttable==1.7.0")
        hashes = [part for part in parts if part.startswith("--hash")]
        bad = [part for part in hashes if not HASH.match(part)]
        if bad or not hashes:
            raise LockError(
                f"{where}: {found.group(1)} needs --hash=sha256:<64 hex digits> for each file it may install "
                "(pip hash, or pip-compile --generate-hashes)"
            )
        requirements.append(f"{found.group(1)}=={found.group(3)}")
        digests = tuple(part.removeprefix("--hash=sha256:") for part in hashes)
        packages.append(LockedPackage(name=found.group(1), version=found.group(3), hashes=digests))
    if not requirements:
        raise LockError(f"{path.name}: names no requirement; list at least one, or declare no lock")
    return Lock(
        path=path, sha256=hashlib.sha256(data).hexdigest(), requirements=tuple(requirements), packages=tuple(packages)
    )


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each requirement, comments dropped and continuation lines joined."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined = (pending + line).strip()
        pending = ""
        if joined:
            lines.append((start, joined))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def cache_root() -> Path:
    """Where Passband keeps what it builds once per host (the scripts' cache too)."""
    configured = os.environ.get("PASSBAND_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "passband"


def folder_of(lock: Lock) -> Path:
    """The lock's environment folder on this host (present only once installed)."""
    return cache_root() / FOLDER / lock.key


def installed_site(lock: Lock) -> Path | None:
    """The installed packages' folder, or None when the lock is not installed on this host."""
    folder = folder_of(lock)
    return folder / SITE if (folder / RECORD).is_file() else None


def install(lock: Lock, *, seconds: float = INSTALL_SECONDS) -> Path:
    """The lock's installed packages' folder, installing it first when this host lacks it; raises
    InstallFailed. Safe to call from several processes at once: the others wait and then find it installed."""
    done = installed_site(lock)
    if done is not None:
        return done
    folder = folder_of(lock)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f"{lock.key}.lock", "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            if installed_site(lock) is None:
                _install_once(lock, folder=folder, seconds=seconds)
    except OSError as error:
        raise InstallFailed(f"cannot install {lock.path.name} under {folder.parent}: {error}") from None
    return folder / SITE


def _install_once(lock: Lock, *, folder: Path, seconds: float) -> None:
    """Install into a scratch folder and rename it into place, with its record, only when pip succeeded."""
    scratch = folder.parent / f"{lock.key}.partial-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        _pip_install(lock, target=scratch / SITE, seconds=seconds)
        record = {"lock": str(lock.path), "sha256": lock.sha256, "requirements": list(lock.requirements)}
        (scratch / RECORD).write_text(json.dumps({**record, "installed_at": time.time()}, indent=2))
        shutil.rmtree(folder, ignore_errors=True)  # a folder without its record is a leftover, never done
        os.rename(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _pip_install(lock: Lock, *, target: Path, seconds: float) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--require-hashes",
        "--only-binary",
        ":all:",
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--quiet",
        "--target",
        str(target),
        "--requirement",
        str(lock.path),
    ]
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        raise InstallFailed(f"installing {lock.path.name} took longer than {seconds:g} s") from None
    if finished.returncode != 0:
        tail = " ".join((finished.stderr or finished.stdout).strip().splitlines()[-4:])
        raise InstallFailed(f"pip could not install {lock.path.name} ({', '.join(lock.requirements)}): {tail[:600]}")
