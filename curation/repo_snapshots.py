"""Repository snapshots in Django's storage: stored once by content hash, read back by workers.

``snapshot_store`` writes (checks the archive, then saves ``repo-snapshots/<hex>.tar.gz`` unless
that name already exists: the same files are stored once whatever the number of tasks or versions
naming them). ``snapshot_read`` is what the engine's ``repo_tests`` verifier loads through; the
curation app registers it at start-up, so a worker on another machine reads the same storage
(the filesystem for ``make run``, object storage when scaled out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from curation import files
from engine.repo_tasks import snapshots

PREFIX = "repo-snapshots"
CACHE_ENTRIES = 16
CACHE_MAX_BYTES = 16 << 20  # per snapshot; bigger ones are read from storage each time

_cache: OrderedDict[str, bytes] = OrderedDict()
_cache_lock = threading.Lock()


def snapshot_path(digest: str) -> str:
    return f"{PREFIX}/{digest.removeprefix('sha256:')}.tar.gz"


def snapshot_store(*, data: bytes) -> snapshots.SnapshotInfo:
    """Check and store a snapshot (tar.gz bytes); returns its digest and file list. Raises
    SnapshotError naming the member at fault; nothing is written then."""
    info = snapshots.inspect(data)
    path = snapshot_path(info.digest)
    if not default_storage.exists(path):
        saved = default_storage.save(path, ContentFile(data))
        if saved != path:  # another process stored the same bytes first
            default_storage.delete(saved)
    return info


def snapshot_exists(*, digest: str) -> bool:
    return default_storage.exists(snapshot_path(digest))


def snapshot_delete(*, digest: str) -> None:
    """Remove a stored snapshot (an upload that was refused after storing it); the caller checks no task uses it."""
    with _cache_lock:
        _cache.pop(digest, None)
    files.stored_file_delete(snapshot_path(digest))


def snapshot_read(digest: str) -> bytes:
    """The stored snapshot's bytes (kept in a small in-process cache: a campaign grades one task many times)."""
    with _cache_lock:
        if digest in _cache:
            _cache.move_to_end(digest)
            return _cache[digest]
    with default_storage.open(snapshot_path(digest), "rb") as handle:
        data = handle.read()
    if len(data) <= CACHE_MAX_BYTES and snapshots.digest_of(data) == digest:
        with _cache_lock:
            _cache[digest] = data
            while len(_cache) > CACHE_ENTRIES:
                _cache.popitem(last=False)
    return data


def snapshot_files(*, digest: str) -> list[str]:
    """The snapshot's file paths (for the task page)."""
    return list(snapshots.inspect(snapshot_read(digest)).files)
