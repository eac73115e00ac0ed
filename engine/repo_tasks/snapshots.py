"""Repository snapshots: a tar.gz of the repository's files, named by the sha256 of its bytes.

A snapshot is built deterministically (sorted names, fixed times and owners), so the same files
give the same hash, and is checked before it is stored: regular files and directories only, no
absolute paths, no ``..``, no ``.git``, within the size limits. Nothing here extracts a snapshot
on the caller's disk; the sandbox does (``runner_program.py``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_SNAPSHOT_FILES = 20_000
MAX_UNPACKED_BYTES = 96 << 20  # the sandbox's private /tmp holds the copy, the patch and the run
SKIPPED_DIRECTORIES = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".venv"})

_store: dict[str, Callable[[str], bytes]] = {}


class SnapshotError(ValueError):
    """A snapshot that cannot be used; the message names the member and what is wrong."""


@dataclass(frozen=True)
class SnapshotInfo:
    digest: str  # "sha256:<hex>"
    files: tuple[str, ...]
    unpacked_bytes: int


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def build_from_files(files: Mapping[str, bytes]) -> bytes:
    """A deterministic tar.gz of ``{relative path: content}``."""
    buffer = io.BytesIO()
    # mtime=0 in the gzip header too: the same files always give the same bytes.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for path in sorted(files):
                _check_member_name(path)
                info = tarfile.TarInfo(path)
                info.size = len(files[path])
                info.mode = 0o644
                info.mtime = 0
                archive.addfile(info, io.BytesIO(files[path]))
    return buffer.getvalue()


def build_from_directory(root: Path) -> bytes:
    """A deterministic tar.gz of the regular files under ``root`` (caches and .git left out)."""
    files: dict[str, bytes] = {}
    for directory, subdirectories, names in os.walk(root):
        subdirectories[:] = sorted(name for name in subdirectories if name not in SKIPPED_DIRECTORIES)
        for name in names:
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file() or name.endswith(".pyc"):
                continue
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return build_from_files(files)


def read_files(data: bytes) -> dict[str, bytes]:
    """Every file of a snapshot, checked (``inspect``'s rules), as ``{path: content}``."""
    inspect(data)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        files = {}
        for member in archive.getmembers():
            if member.isfile():
                extracted = archive.extractfile(member)
                assert extracted is not None
                files[member.name] = extracted.read()
        return files


def inspect(data: bytes) -> SnapshotInfo:
    """Check a snapshot; raises SnapshotError naming the member that breaks a rule."""
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SnapshotError(f"snapshot: not a tar.gz archive ({error})") from error
    names: list[str] = []
    total = 0
    try:
        with archive:
            for member in archive:
                _check_member_name(member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    raise SnapshotError(f"snapshot member {member.name}: only regular files and directories allowed")
                total += member.size
                names.append(member.name)
                if len(names) > MAX_SNAPSHOT_FILES:
                    raise SnapshotError(f"snapshot: more than {MAX_SNAPSHOT_FILES} files")
                if total > MAX_UNPACKED_BYTES:
                    raise SnapshotError(f"snapshot: more than {MAX_UNPACKED_BYTES >> 20} MiB unpacked")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SnapshotError(f"snapshot: damaged archive ({error})") from error
    if not names:
        raise SnapshotError("snapshot: the archive holds no files")
    return SnapshotInfo(digest=digest_of(data), files=tuple(sorted(names)), unpacked_bytes=total)


def _check_member_name(name: str) -> None:
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or ".." in pure.parts:
        raise SnapshotError(f"snapshot member {name!r}: paths must be relative and stay inside the repository")
    if ".git" in pure.parts:
        raise SnapshotError(f"snapshot member {name}: .git is not part of a snapshot (export the work tree)")


# -- where snapshots come from ------------------------------------------------------------------


def configure_store(loader: Callable[[str], bytes]) -> None:
    """Set how ``load`` finds a snapshot's bytes by digest (the web app reads Django's storage; a
    trainer can read a folder). The bytes are checked against the digest on every load."""
    _store["loader"] = loader


def folder_loader(folder: Path) -> Callable[[str], bytes]:
    """A loader reading ``<folder>/<hex>.tar.gz``."""

    def load_from_folder(digest: str) -> bytes:
        return (folder / f"{digest.removeprefix('sha256:')}.tar.gz").read_bytes()

    return load_from_folder


def load(digest: str) -> bytes:
    """The snapshot's bytes. Raises SnapshotError when no store is configured, the snapshot is
    missing, or its bytes do not match the digest."""
    loader = _store.get("loader")
    if loader is None:
        raise SnapshotError("no snapshot store is configured (engine.repo_tasks.snapshots.configure_store)")
    try:
        data = loader(digest)
    except OSError as error:
        raise SnapshotError(f"snapshot {digest} could not be read: {error}") from error
    if digest_of(data) != digest:
        raise SnapshotError(f"snapshot {digest}: the stored bytes do not match their digest")
    return data
