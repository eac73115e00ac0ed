"""A sandbox session: one sandboxed program that lives for many requests, a line in and a line out each.

A run in ``session`` mode is a script run (same isolation, filesystem view and rlimits, from the same fork
server) whose stdin is a pipe the caller keeps writing to instead of a fixed text. The program answers on
its stdout, one line per request. The run ends when the caller closes its end of the request pipe (the
setup process sees the hang-up and kills the program's namespace), when the caller dies (the same), when
the program exits, or when ``lifetime_seconds`` run out. A request the program does not answer within its
``seconds`` ends the session (``SessionTimeout``); a program that dies is ``SessionEnded``, whose ``run``
says how (``engine.sandbox.outcome.SandboxRun``).

    session = sandbox.open_session(program=source, limits=SandboxLimits(memory_bytes=512 << 20), lifetime_seconds=300)
    reply = session.exchange(b'{"op": "reset", "seed": 3}', seconds=5.0)
    session.close()
"""

from __future__ import annotations

import json
import os
import select
import time
import weakref
from collections.abc import Callable

from engine.sandbox.limits import SandboxLimits
from engine.sandbox.outcome import SandboxRun, collect, interpret

STDERR_TAIL_BYTES = 8192
CLOSE_SECONDS = 3.0
MAX_LINE_BYTES = 16 << 20


class SessionTimeout(Exception):
    """The program did not answer in time; the session has been ended."""


class SessionEnded(Exception):
    """The program is gone (it crashed, was killed at a limit, or exited); ``run`` says how."""

    def __init__(self, message: str, *, run: SandboxRun | None) -> None:
        super().__init__(message)
        self.run = run


class SandboxSession:
    """One open session (see the module docstring). Not thread-safe: one request at a time."""

    def __init__(self, *, request_fd: int, read_ends: list[int], limits: SandboxLimits) -> None:
        self._request_fd: int | None = request_fd
        self._read_ends = read_ends
        self._stdout_fd, self._stderr_fd = read_ends[0], read_ends[1]
        self._limits = limits
        self._buffer = b""
        self._stderr = bytearray()
        self._poll = select.poll()
        self._poll.register(self._stdout_fd, select.POLLIN)
        self._poll.register(self._stderr_fd, select.POLLIN)
        self._started = time.monotonic()
        self.ended: SandboxRun | None = None
        # A session dropped without close() still ends its run: its request pipe closes with it.
        self._finalizer = weakref.finalize(self, _close_all, [request_fd, *read_ends])

    @property
    def open(self) -> bool:
        return self.ended is None

    def exchange(self, line: bytes, *, seconds: float) -> bytes:
        """Send one request line, return the program's reply line (without its newline). Raises SessionTimeout
        (the session is ended) or SessionEnded."""
        if self._request_fd is None:
            raise SessionEnded("the session is closed", run=self.ended)
        data = memoryview(line + b"\n")
        try:
            while data:
                data = data[os.write(self._request_fd, data) :]
        except OSError:
            raise SessionEnded("the program is gone", run=self.close()) from None
        return self.receive(seconds=seconds)

    def receive(self, *, seconds: float) -> bytes:
        """The program's next reply line, waiting at most ``seconds``."""
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise SessionTimeout(f"no answer within {seconds:g} s")
            for fd, _events in self._poll.poll(remaining * 1000):
                chunk = self._read(fd)
                if fd == self._stderr_fd:
                    self._stderr = (self._stderr + chunk)[-STDERR_TAIL_BYTES:]
                    if not chunk:
                        self._poll.unregister(fd)
                    continue
                if not chunk:
                    raise SessionEnded("the program ended", run=self.close())
                self._buffer += chunk
                if len(self._buffer) > MAX_LINE_BYTES:
                    self.close()
                    raise SessionEnded(f"the program's reply is over {MAX_LINE_BYTES} bytes", run=self.ended)
        reply, self._buffer = self._buffer.split(b"\n", 1)
        return reply

    def stderr_tail(self) -> str:
        """The last of what the program wrote on stderr, as text."""
        text = bytes(self._stderr).decode("utf-8", "replace")
        if self.ended is not None and self.ended.stderr:
            text = (text + self.ended.stderr)[-STDERR_TAIL_BYTES:]
        return text

    def close(self) -> SandboxRun:
        """End the session (the program is killed if it still runs) and say how its run ended."""
        if self.ended is not None:
            return self.ended
        self._finalizer.detach()
        if self._request_fd is not None:
            os.close(self._request_fd)
            self._request_fd = None
        collected = collect(
            self._read_ends, max_output_bytes=self._limits.max_output_bytes, deadline=time.monotonic() + CLOSE_SECONDS
        )
        self.ended = interpret(collected, limits=self._limits, nonce=None, elapsed=time.monotonic() - self._started)
        return self.ended

    def _read(self, fd: int) -> bytes:
        try:
            return os.read(fd, 1 << 16)
        except OSError:
            return b""


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def open_session(
    send: Callable[[list[int]], None], *, program: str, limits: SandboxLimits, lifetime_seconds: float
) -> SandboxSession:
    """Start ``program`` in session mode through a fork server (``send`` hands it the run's descriptors).
    Raises SessionEnded when the server cannot be reached."""
    from engine.sandbox import SandboxUnavailable

    request = {"mode": "session", "program": program, "stdin": "", "lifetime_seconds": float(lifetime_seconds)}
    request["limits"] = limits.as_request()
    request_fd = os.memfd_create("passband-program", os.MFD_CLOEXEC)
    requests_read, requests_write = os.pipe()
    pipes = [os.pipe() for _ in range(4)]  # stdout, stderr, report, status
    try:
        data = memoryview(json.dumps(request).encode())
        while data:
            data = data[os.write(request_fd, data) :]
        try:
            send([request_fd, requests_read] + [write_end for _, write_end in pipes])
        except SandboxUnavailable as error:
            os.close(requests_write)
            for read_end, _ in pipes:
                os.close(read_end)
            raise SessionEnded(str(error), run=SandboxRun(status="error", error=str(error), limits=limits)) from None
    finally:
        for fd in [request_fd, requests_read] + [write_end for _, write_end in pipes]:
            os.close(fd)
    return SandboxSession(request_fd=requests_write, read_ends=[read_end for read_end, _ in pipes], limits=limits)
