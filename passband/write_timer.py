"""How long each process holds SQLite's write lock: the longest write transaction, per process, in a file.

On the embedded default one transaction writes at a time (IMMEDIATE: the lock is taken at BEGIN), so the longest
write transaction is how long a sign-in may wait. With PASSBAND_TIME_WRITE_TRANSACTIONS=1 (settings.py adds this
app), every SQLite connection of the process is timed: from the moment BEGIN returns (the lock is held) until
COMMIT or ROLLBACK returns, through a `connection.execute_wrapper` (BEGIN) and the connection's commit and rollback.
A write statement outside a transaction is not timed: its time would include its wait for the lock. Each new
maximum is written to
`<var>/write-transactions/<pid>.json` as {"pid", "process", "max_ms", "statement"} (the transaction's first
statement, shortened), replaced whole, so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created

_lock = threading.Lock()
_longest = {"max_ms": 0.0}


def report_folder() -> Path:
    return Path(settings.VAR_DIR) / "write-transactions"


def _record(seconds: float, statement: str) -> None:
    """Keep the process's maximum; write it out when it grows."""
    milliseconds = seconds * 1000
    with _lock:
        if milliseconds <= _longest["max_ms"]:
            return
        _longest["max_ms"] = milliseconds
        folder = report_folder()
        folder.mkdir(parents=True, exist_ok=True)
        report = {"pid": os.getpid(), "process": " ".join(sys.argv)[:200], "max_ms": round(milliseconds, 1)}
        report["statement"] = statement[:300]
        temporary = folder / f".{os.getpid()}.json.tmp"
        temporary.write_text(json.dumps(report))
        os.replace(temporary, folder / f"{os.getpid()}.json")


class _TransactionClock:
    """One connection's open transaction: when its lock was taken and its first statement."""

    def __init__(self, connection) -> None:
        self.started: float | None = None
        self.statement = ""
        commit, rollback = connection._commit, connection._rollback
        connection._commit = lambda: self._ended(commit)
        connection._rollback = lambda: self._ended(rollback)

    def __call__(self, execute, sql, params, many, context):
        words = sql.lstrip().split(None, 1)
        verb = words[0].upper() if words else ""
        if verb == "BEGIN":
            result = execute(sql, params, many, context)
            self.started, self.statement = time.monotonic(), ""
            return result
        if self.started is not None:
            self.statement = self.statement or sql
        return execute(sql, params, many, context)

    def _ended(self, method):
        try:
            return method()
        finally:
            if self.started is not None:
                _record(time.monotonic() - self.started, self.statement or "BEGIN")
                self.started = None


def _instrument(sender, connection, **kwargs) -> None:
    if connection.vendor != "sqlite" or getattr(connection, "_passband_write_clock", None):
        return
    clock = _TransactionClock(connection)
    connection._passband_write_clock = clock
    connection.execute_wrappers.append(clock)


class WriteTimerConfig(AppConfig):
    """Added to INSTALLED_APPS by settings.py when PASSBAND_TIME_WRITE_TRANSACTIONS=1."""

    name = "passband"
    label = "passband_write_timer"

    def ready(self) -> None:
        connection_created.connect(_instrument, weak=False)
