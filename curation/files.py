"""The files Passband keeps, through Django's storage API: uploads waiting for their import, release files,
repository snapshots. With the default storage on the filesystem (`make run`) they live under MEDIA_ROOT; with
S3-compatible object storage (PASSBAND_STORAGE=s3, docs/operations.md) a worker on another machine reads and
writes them with no shared disk.

Names are storage names ("imports/3f2a....upload"), never paths. Code that needs a real file (a Parquet
reader, a second pass over a task file) asks for `stored_file_local`, which is the file itself on the
filesystem and a temporary download otherwise. Names written before the storage API (absolute paths of
files under MEDIA_ROOT) are still read and deleted as paths.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.http import FileResponse, HttpResponse, HttpResponseRedirect
from prometheus_client import Counter

from curation.errors import CurationError

STORAGE_FAILURES = Counter(
    "passband_storage_failures", "Files the storage could not save (disk full, bucket unreachable).", ["operation"]
)


class StorageUnavailable(CurationError):
    """The storage refused a file (full, unreachable, denied): nothing was kept; try again later."""


def _storage_errors() -> tuple[type[BaseException], ...]:
    """What the backends raise when they cannot store: OSError (a full or read-only disk), boto's errors."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return (OSError,)
    return (OSError, BotoCoreError, ClientError)


def _legacy_path(name: str) -> Path | None:
    """A name stored before the storage API: an absolute path on this machine's disk."""
    return Path(name) if os.path.isabs(name) else None


def stored_file_save(*, name: str, content: IO[bytes] | File, replace: bool = False, operation: str = "") -> str:
    """Store `content` under `name` and return the name it got. Without `replace`, a name already taken gets
    a fresh suffix (Django's rule); with it, the old file is replaced. Raises StorageUnavailable (counted on
    /metrics as passband_storage_failures_total{operation}) when the storage cannot keep it; whatever part of
    the file was written is removed."""
    try:
        if replace and default_storage.exists(name):
            default_storage.delete(name)
        return default_storage.save(name, content if isinstance(content, File) else File(content, name=name))
    except _storage_errors() as error:
        STORAGE_FAILURES.labels(operation=operation or name.split("/", 1)[0]).inc()
        if replace:  # the name is this caller's: drop whatever part of the file got written
            with contextlib.suppress(*_storage_errors()):
                if default_storage.exists(name):
                    default_storage.delete(name)
        raise StorageUnavailable(
            f"The file could not be stored ({type(error).__name__}: {error}); nothing was kept. Try again later, "
            "or ask an operator to check the storage."
        ) from error


def stored_file_exists(name: str) -> bool:
    legacy = _legacy_path(name)
    return legacy.exists() if legacy is not None else default_storage.exists(name)


def stored_file_delete(name: str) -> None:
    """Delete a stored file; a name that is gone already is fine."""
    legacy = _legacy_path(name)
    if legacy is not None:
        legacy.unlink(missing_ok=True)
    elif name and default_storage.exists(name):
        default_storage.delete(name)


@contextlib.contextmanager
def stored_file_local(name: str) -> Iterator[Path]:
    """A path on this machine to read the stored file from, for as long as the block runs: the file itself
    when the storage is this machine's disk, else a private temporary copy deleted afterwards.
    Raises FileNotFoundError when there is no such file."""
    legacy = _legacy_path(name)
    if legacy is not None:
        if not legacy.exists():
            raise FileNotFoundError(name)
        yield legacy
        return
    if not default_storage.exists(name):
        raise FileNotFoundError(name)
    try:
        local = Path(default_storage.path(name))
    except NotImplementedError:  # object storage: no local path
        pass
    else:
        yield local
        return
    folder = tempfile.mkdtemp(prefix="passband-file-")
    try:
        copy = Path(folder) / Path(name).name
        with default_storage.open(name, "rb") as source, open(copy, "wb") as target:
            shutil.copyfileobj(source, target, length=1 << 20)
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stored_file_response(
    name: str, *, filename: str, content_type: str | None = None, checksum: str = ""
) -> HttpResponse:
    """The stored file as a download: a redirect to a signed URL of the object store when
    PASSBAND_STORAGE_SIGNED_DOWNLOADS is on (the bytes do not pass through the web process), else streamed.
    Raises FileNotFoundError when there is no such file."""
    if not stored_file_exists(name):
        raise FileNotFoundError(name)
    if getattr(settings, "PASSBAND_STORAGE_SIGNED_DOWNLOADS", False) and _legacy_path(name) is None:
        parameters = {"ResponseContentDisposition": f'attachment; filename="{filename}"'}
        if content_type:
            parameters["ResponseContentType"] = content_type
        url = default_storage.url(name, parameters=parameters, expire=settings.PASSBAND_STORAGE_URL_SECONDS)
        response: HttpResponse = HttpResponseRedirect(url)
    else:
        legacy = _legacy_path(name)
        handle = open(legacy, "rb") if legacy is not None else default_storage.open(name, "rb")
        response = FileResponse(handle, as_attachment=True, filename=filename, content_type=content_type)
    if checksum:
        response["X-Checksum-SHA256"] = checksum
    return response
