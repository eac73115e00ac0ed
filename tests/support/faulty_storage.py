"""A storage that fails the way a full disk does, for the faults a real storage cannot be made to show on
demand: `FullAfter.saves_left` saves succeed, then every save raises ENOSPC (None: never fails)."""

from __future__ import annotations

import errno

from django.core.files.storage import FileSystemStorage


class FullAfter(FileSystemStorage):
    saves_left: int | None = None

    def _save(self, name, content):
        if FullAfter.saves_left is not None:
            if FullAfter.saves_left <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            FullAfter.saves_left -= 1
        return super()._save(name, content)
