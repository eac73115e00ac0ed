from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError
from django.db import OperationalError


class ServiceError(Exception):
    """A problem the user caused and can fix; views and commands show its message.

    Every app's services raise a subclass of this one type (CurationError, CalibrationError,
    ReleaseError), so a view that calls services across apps catches one thing.
    """


def api_error_document(*, detail: str, code: str, fields: dict[str, list[str]] | None = None) -> dict:
    """The one JSON form of every API error (docs/api.md): `detail`, a sentence saying what is wrong
    and what to do; `code`, a stable machine-readable word (`invalid`, `not_found`, `too_large`...);
    `fields`, the messages per request field (a path such as `items[2].task`), empty when the error
    is about the request as a whole. It lives here, below web and api, because the input middleware
    (which refuses before any view runs) answers API requests in it too."""
    return {"detail": detail, "code": code, "fields": fields or {}}


# A write that found the database locked after the busy timeout (SQLite, the embedded default): the request is
# answered 503 with Retry-After (web/busy.py, api/errors.py), a command with this message.
DATABASE_BUSY = "The database is busy with another write; try again in a few seconds."
RETRY_AFTER_S = 5


def is_database_locked(error: BaseException) -> bool:
    """Whether `error` is SQLite's "database is locked" (or "database table is locked")."""
    return isinstance(error, OperationalError) and "is locked" in str(error)


@contextmanager
def database_busy_as_command_error(*, what_stays: str) -> Iterator[None]:
    """For management commands: a database still locked after the busy timeout becomes a CommandError saying
    so, what of the command's work stays (`what_stays`, a sentence) and to run it again; other errors pass."""
    try:
        yield
    except OperationalError as error:
        if not is_database_locked(error):
            raise
        raise CommandError(f"{DATABASE_BUSY} {what_stays} Run the command again.") from None
