"""A small pool of long-lived helper processes that answer JSON requests, one line each.

Used for work that must be killable (math-verify on pathological input). Helpers are started
with ``subprocess`` (not ``multiprocessing``, which daemonic Celery prefork workers forbid), on
demand, up to ``max_workers``; any thread may call ``call``. A helper that misses its deadline
or dies is killed and replaced on the next request.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class WorkerTimeout(Exception):
    """The helper did not answer in time; it has been killed."""


class WorkerFailed(Exception):
    """The helper could not be started or died mid-request."""


class _Worker:
    def __init__(self, argv: list[str], *, startup_seconds: float) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            cwd="/",
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        # Raw descriptors and one poll object: a request is a few syscalls, no buffering layers.
        self.request_fd = self.process.stdin.fileno()
        self.response_fd = self.process.stdout.fileno()
        self.poller = select.poll()
        self.poller.register(self.response_fd, select.POLLIN)
        self.buffer = b""
        ready = self.receive(deadline=time.monotonic() + startup_seconds)
        if not ready.get("ready"):
            self.kill()
            raise WorkerFailed(f"helper did not start: {ready}")

    def send(self, request: dict[str, Any]) -> None:
        data = json.dumps(request).encode() + b"\n"
        try:
            while data:
                data = data[os.write(self.request_fd, data) :]
        except OSError as error:
            raise WorkerFailed(f"helper is gone: {error}") from error

    def receive(self, *, deadline: float) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerTimeout()
            if not self.poller.poll(remaining * 1000):
                continue
            chunk = os.read(self.response_fd, 1 << 16)
            if not chunk:
                raise WorkerFailed(f"helper exited with {self.process.poll()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError as error:
            raise WorkerFailed(f"helper answered garbage: {line[:200]!r}") from error

    def exchange(
        self, request: dict[str, Any], *, deadline: float, host: Callable[[dict[str, Any]], dict[str, Any]] | None
    ) -> dict[str, Any]:
        """Send ``request`` and wait for its response until ``deadline``, answering the questions the helper
        asks meanwhile (``{"host": question}`` lines) with ``host(question)``; a helper that asks with no
        ``host`` to answer is answered ``{"refused": ...}``."""
        self.send(request)
        while True:
            response = self.receive(deadline=deadline)
            if "host" not in response:
                return response
            question = response["host"] if isinstance(response["host"], dict) else {}
            answer = host(question) if host is not None else {"refused": "this request has nothing to ask the host"}
            self.send({"host_answer": answer})

    def kill(self) -> None:
        try:
            self.process.kill()
        except OSError:
            pass
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


# One helper process: ``send(request)``, ``receive(deadline=...)``, ``kill()``; started with an empty environment.
HelperProcess = _Worker


class WorkerPool:
    """Helpers running ``argv``; ``call`` sends one request and waits at most ``timeout`` seconds."""

    def __init__(self, argv: list[str], *, max_workers: int, startup_seconds: float = 60.0) -> None:
        self.argv = argv
        self.max_workers = max_workers
        self.startup_seconds = startup_seconds
        self._condition = threading.Condition()
        self._idle: list[_Worker] = []
        self._count = 0
        self._owner_pid = os.getpid()

    def call(
        self,
        request: dict[str, Any],
        *,
        timeout: float,
        host: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The helper's response to ``request``, its questions meanwhile answered by ``host`` (``exchange``)."""
        worker = self._acquire()
        try:
            response = worker.exchange(request, deadline=time.monotonic() + timeout, host=host)
        except BaseException:  # a timeout, a dead helper, or a host answer that failed: the helper is not reused
            worker.kill()
            self._forget()
            raise
        self._release(worker)
        return response

    def close(self) -> None:
        with self._condition:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for worker in idle:
            worker.kill()

    def _acquire(self) -> _Worker:
        with self._condition:
            self._reset_after_fork()
            while True:
                if self._idle:
                    worker = self._idle.pop()
                    if worker.process.poll() is None:
                        return worker
                    worker.kill()
                    self._count -= 1
                    continue
                if self._count < self.max_workers:
                    self._count += 1
                    break
                self._condition.wait()
        try:
            return _Worker(self.argv, startup_seconds=self.startup_seconds)
        except BaseException:
            self._forget()
            raise

    def _release(self, worker: _Worker) -> None:
        with self._condition:
            if self._owner_pid != os.getpid():
                return
            self._idle.append(worker)
            self._condition.notify()

    def _forget(self) -> None:
        with self._condition:
            self._count -= 1
            self._condition.notify()

    def _reset_after_fork(self) -> None:
        # Helpers inherited across fork (Celery prefork) belong to the parent: start our own.
        if self._owner_pid != os.getpid():
            self._owner_pid = os.getpid()
            self._idle = []
            self._count = 0


class HelperScript:
    """The process-wide pool of one helper script (``python -I <script> <memory_bytes> <arguments>...``): at
    most one helper per CPU (two at least), started on demand; a forked child (Celery prefork) starts its own."""

    def __init__(self, script: Path, *, memory_bytes: int, arguments: tuple[str, ...] = ()) -> None:
        self.script = script
        self.memory_bytes = memory_bytes
        self.arguments = arguments
        self._lock = threading.Lock()
        self._pool: WorkerPool | None = None
        os.register_at_fork(after_in_child=self._forget)

    def pool(self) -> WorkerPool:
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(
                    [sys.executable or "python3", "-I", str(self.script), str(self.memory_bytes), *self.arguments],
                    max_workers=max(2, os.cpu_count() or 1),
                )
            return self._pool

    def dedicated(self, *, startup_seconds: float = 60.0) -> HelperProcess:
        """A helper of this script for one caller alone, outside the pool (an episode's world lives in one):
        the caller sends, receives and kills it. Raises WorkerFailed or WorkerTimeout when it cannot start."""
        argv = [sys.executable or "python3", "-I", str(self.script), str(self.memory_bytes), *self.arguments]
        return HelperProcess(argv, startup_seconds=startup_seconds)

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._pool = None
