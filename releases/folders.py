"""Folders written from a release (the Hub's, NeMo Gym's): whole or not at all."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from releases.errors import ReleaseError


@contextlib.contextmanager
def new_folder(folder: Path, *, what: str) -> Iterator[Path]:
    """Yield a staging folder beside `folder`, renamed into place once the block ends without error (and
    removed if it raises). ReleaseError when `folder` exists and is not empty: choose a new folder for `what`."""
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise ReleaseError(f"{folder} is not empty: choose a new folder for the {what}.")
    staging = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}.partial")
    staging.mkdir(parents=True)
    try:
        yield staging
        if folder.exists():
            folder.rmdir()
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
