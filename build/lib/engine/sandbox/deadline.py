"""A deadline for Python code running in the calling thread, enforced by one watchdog thread.

At the deadline the watchdog raises ``DeadlineExceeded`` inside the late thread
(``PyThreadState_SetAsyncExc``); the exception surfaces at the thread's next bytecode. That
interrupts any pure-Python loop (sympy's simplification, latex parsing), from any thread, with
no signals. It cannot interrupt one long call into C that holds the GIL (a giant integer
power): callers screen such inputs out and send them to a killable helper process instead.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")

_set_async_exc_api = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc_api.restype = ctypes.c_int


def _set_async_exc(thread_id: int, exception: type[BaseException] | None) -> None:
    """Schedule ``exception`` in the thread, or cancel a scheduled one (None is passed as NULL)."""
    _set_async_exc_api(ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception is not None else None)


class DeadlineExceeded(BaseException):
    """Raised in a thread that overran its deadline. A BaseException so that library code's
    ``except Exception`` (math-verify has several) does not swallow it."""


class _Entry:
    __slots__ = ("done", "fired", "lock", "thread_id")

    def __init__(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.done = False
        self.fired = False
        self.lock = threading.Lock()


class _Watchdog:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, _Entry]] = []
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, entry: _Entry) -> None:
        with self._condition:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="passband-deadline-watchdog", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (deadline, next(self._counter), entry))
            # Wake the watchdog only when it sleeps too long for this deadline: waking it on
            # every call would make it compete for the GIL with the work it guards.
            if self._heap[0][2] is entry:
                self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)  # finished in time: forget it
                if not self._heap:
                    self._condition.wait()
                    continue
                deadline, _, entry = self._heap[0]
                remaining = deadline - time.monotonic()
                if remaining > 0:
                    self._condition.wait(remaining)
                    continue
                heapq.heappop(self._heap)
            with entry.lock:
                if not entry.done:
                    entry.fired = True
                    _set_async_exc(entry.thread_id, DeadlineExceeded)


_watchdog = _Watchdog()


def _new_watchdog_after_fork() -> None:
    global _watchdog
    _watchdog = _Watchdog()  # the watchdog thread does not survive a fork


os.register_at_fork(after_in_child=_new_watchdog_after_fork)


def run_with_deadline(function: Callable[[], Result], seconds: float) -> Result:
    """Call ``function()`` in this thread; raise DeadlineExceeded if it runs past ``seconds``."""
    entry = _Entry(threading.get_ident())
    _watchdog.add(time.monotonic() + seconds, entry)
    try:
        return function()
    finally:
        with entry.lock:
            entry.done = True
            if entry.fired:
                # The exception may not have surfaced yet: cancel it so it cannot hit later code.
                _set_async_exc(entry.thread_id, None)
