"""Repository snapshots: a tar.gz of the repository's files, named by the sha256 of its bytes.

A snapshot is built deterministically (sorted names, fixed times and owners), so the same files
give the same hash, and is checked before it is stored: regular files and directories only, no
absolute paths, no ``..``, no ``.git``, no control characters or undecodable bytes in a name, no two
members that land on one path (``a`` and ``./a``, NFC and NFD spellings, a file and a folder), within
the size limits. The check reads the archive through a bound: no header (PAX or GNU long name) over
``MAX_HEADER_BYTES`` is read into memory and no more than ``MAX_ARCHIVE_BYTES`` are decompressed.
Nothing here extracts a snapshot on the caller's disk; the sandbox does (``runner_program.py``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import unicodedata
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, cast

MAX_SNAPSHOT_FILES = 20_000
MAX_UNPACKED_BYTES = 96 << 20  # the sandbox's private /tmp holds the copy, the patch and the run
MAX_HEADER_BYTES = 1 << 20
MAX_ARCHIVE_BYTES = MAX_UNPACKED_BYTES + MAX_SNAPSHOT_FILES * 8192  # headers and padding around the files
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
        archive = tarfile.open(fileobj=cast(IO[bytes], _Bounded(gzip.GzipFile(fileobj=io.BytesIO(data)))), mode="r:")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise SnapshotError(f"snapshot: not a tar.gz archive ({error})") from error
    names: list[str] = []
    paths = _Paths()
    total = 0
    try:
        with archive:
            for member in archive:
                _check_member_name(member.name)
                paths.add(member.name, directory=member.isdir())
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
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise SnapshotError(f"snapshot: damaged archive ({error})") from error
    if not names:
        raise SnapshotError("snapshot: the archive holds no files")
    return SnapshotInfo(digest=digest_of(data), files=tuple(sorted(names)), unpacked_bytes=total)


class _Bounded:
    """The decompressed stream as tarfile reads it, refusing a read over MAX_HEADER_BYTES (tarfile reads a
    whole PAX or long-name header at once) and any position past MAX_ARCHIVE_BYTES (a gzip bomb)."""

    def __init__(self, stream: gzip.GzipFile) -> None:
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > MAX_HEADER_BYTES:
            raise SnapshotError(f"snapshot: a member header over {MAX_HEADER_BYTES >> 20} MiB")
        self._within(self.stream.tell() + size)
        return self.stream.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._within(offset if whence == io.SEEK_SET else self.stream.tell() + offset)
        return self.stream.seek(offset, whence)

    def tell(self) -> int:
        return self.stream.tell()

    @staticmethod
    def _within(position: int) -> None:
        if position > MAX_ARCHIVE_BYTES:
            raise SnapshotError(f"snapshot: more than {MAX_ARCHIVE_BYTES >> 20} MiB once decompressed")


class _Paths:
    """The paths members land on, to refuse two members on one path (a later one would overwrite or
    shadow the earlier when unpacked): spelled apart only by ``./``, ``//`` or Unicode normalisation,
    or a file where another member needs a folder. Folders may repeat."""

    def __init__(self) -> None:
        self.kinds: dict[str, bool] = {}  # normalised path -> is a folder

    def add(self, name: str, *, directory: bool) -> None:
        path = unicodedata.normalize("NFC", PurePosixPath(name).as_posix())
        parents = [parent.as_posix() for parent in PurePosixPath(path).parents if parent.as_posix() != "."]
        if any(self.kinds.get(parent) is False for parent in parents):
            raise SnapshotError(f"snapshot member {name!r}: a file of the archive holds its folder's name")
        if path in self.kinds and not (directory and self.kinds[path]):
            raise SnapshotError(f"snapshot member {name!r}: another member lands on the same path")
        self.kinds[path] = directory
        for parent in parents:
            self.kinds.setdefault(parent, True)


def _check_member_name(name: str) -> None:
    pure = PurePosixPath(name)
    if not name or pure.is_absolute() or ".." in pure.parts:
        raise SnapshotError(f"snapshot member {name!r}: paths must be relative and stay inside the repository")
    if any(ord(character) < 0x20 or ord(character) == 0x7F for character in name):
        raise SnapshotError(f"snapshot member {name!r}: control characters in a name")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise SnapshotError(f"snapshot member {name!r}: the name is not UTF-8") from None
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
