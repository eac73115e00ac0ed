"""Pre-started episode processes for stateful plug-ins (engine/episodes/stateful.py): what bounds an episode's
start to its reset alone.

A stateful world's process spends most of its start importing the plug-in and what it uses (pandas: most of a
second), before the first request. When an episode takes its process from here, that import has already run
while the worker did something else, and the episode waits for ``reset(seed)`` only. Each take starts the
replacement at once (opening a session only hands the fork server its descriptors; the import runs in the new
process), so the next episode finds one ready. The pool holds at most ``PASSBAND_WORLD_POOL`` idle processes
(default 1) per environment and worker process, none before an environment's first episode: the memory bound is
``MEMORY_MB`` times (concurrency + pool). An idle process older than ``MAX_IDLE_SECONDS`` is ended rather than
used; one that died while idle fails its reset, and the world starts a fresh one instead (``StatefulWorld``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable

from engine.sandbox.session import SandboxSession

MAX_IDLE_SECONDS = 600.0
DEFAULT_SIZE = 1

_lock = threading.Lock()
_idle: dict[Hashable, list[tuple[float, SandboxSession]]] = {}


def pool_size() -> int:
    """Idle processes kept per environment (``PASSBAND_WORLD_POOL``; 0 turns the pool off)."""
    try:
        return max(0, int(os.environ.get("PASSBAND_WORLD_POOL", DEFAULT_SIZE)))
    except ValueError:
        return DEFAULT_SIZE


def take(key: Hashable, start: Callable[[], SandboxSession]) -> SandboxSession | None:
    """A pre-started session for ``key`` (None when none is ready: the caller starts its own), after starting
    replacements up to the pool's size with ``start``."""
    size = pool_size()
    if size == 0:
        return None
    now = time.monotonic()
    with _lock:
        waiting = _idle.setdefault(key, [])
        stale = [session for started, session in waiting if now - started > MAX_IDLE_SECONDS]
        waiting[:] = [(started, session) for started, session in waiting if now - started <= MAX_IDLE_SECONDS]
        taken = waiting.pop(0)[1] if waiting else None
        missing = size - len(waiting)
    for session in stale:
        session.close()
    fresh = []
    for _ in range(missing):
        try:
            fresh.append((time.monotonic(), start()))
        except Exception:  # noqa: BLE001 - a pool that cannot fill leaves the episode to start its own
            break
    with _lock:
        _idle.setdefault(key, []).extend(fresh)
    return taken


def drain() -> None:
    """End every idle process of this worker process (tests, and a benchmark's arms)."""
    with _lock:
        sessions = [session for waiting in _idle.values() for _, session in waiting]
        _idle.clear()
    for session in sessions:
        session.close()


def _forget_after_fork() -> None:
    # A forked child (Celery prefork) must not share its parent's processes: it starts its own.
    global _lock
    _idle.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
