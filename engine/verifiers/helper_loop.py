"""The loop a verifier helper process runs: one JSON request per line on stdin, one JSON response per
line on stdout, each request under a soft deadline from an interval timer.

Helpers (math_worker.py, reasoning_gym_worker.py) run as ``python -I <script> <memory_bytes>`` from
`engine.sandbox.worker_pool.WorkerPool`; the caller kills a helper that misses its deadline by more
than a grace period (a library stuck in C, where no signal reaches). Standard library only: a helper
imports this as its sibling file, never another installed copy of the package.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import signal
import sys
from collections.abc import Callable, Iterator


class SoftTimeout(BaseException):
    """Raised by the interval timer; a BaseException so a library's `except Exception` lets it through."""


def _on_alarm(signum: int, frame: object) -> None:
    raise SoftTimeout()


# What a locked-down helper may no longer do once loaded (sys.addaudithook events; a hook cannot be removed).
_FORBIDDEN_EVENTS = (
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.symlink",
    "os.link",
    "os.putenv",
    "shutil.rmtree",
    "subprocess.Popen",
    "pty.spawn",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.cdata",
    "ctypes.call_function",
    "sys.addaudithook",
    "sys.setprofile",
    "sys.settrace",
)
_incoming: dict = {"lines": iter(())}  # the request lines, shared with ask_host
_loading = {"now": False}  # while ``load`` runs locked down (``lock_load``)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class Forbidden(PermissionError):
    """What a locked-down helper raises instead of running a forbidden operation (an OSError, so code
    that tolerates a failed write, as the import system does for bytecode caches, carries on)."""


def _another_process(path: object) -> bool:
    """Whether ``path`` is under another process's /proc entry (its environment, memory, open files): the
    helper's parent is the worker, whose environment holds its secrets."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    parts = os.path.realpath(path).split("/")
    return len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and parts[2] != str(os.getpid())


def _lockdown_hook(event: str, args: tuple) -> None:
    if _loading["now"] and (event == "os.putenv" or (event == "ctypes.dlopen" and args and args[0] is None)):
        # What importing numpy does: set the helper's own, empty environment (no process can inherit it) and
        # open the running process's own symbols, which loads no code (looking one up or calling it is refused).
        return
    if event.startswith(_FORBIDDEN_EVENTS):
        raise Forbidden(f"{event} is not allowed while scoring")
    if event == "open" and args and _another_process(args[0]):
        raise Forbidden("reading another process's /proc entries is not allowed while scoring")
    if event == "open" and len(args) > 2:
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(letter in mode for letter in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        ):
            raise Forbidden("writing files is not allowed while scoring")


def serve(
    evaluate: Callable[[dict], dict],
    *,
    load: Callable[[], object] | None = None,
    timed_out: Callable[[dict], dict],
    lockdown: bool = False,
    lock_load: bool = False,
) -> None:
    """Answer requests until stdin closes (installed verifier kinds and world providers, math scorers).
    `load` runs once before the ready line (a slow import); `evaluate(request)` answers one request;
    `timed_out(request)` is the response when its ``timeout_seconds`` (default 5) pass first. argv[1], when
    given, caps the address space in bytes.

    `lockdown`: after loading, an audit hook refuses processes, network, file writes and ctypes (``eval``
    itself still runs: scorers such as sympy's ``parse_expr`` need it, but what the evaluated text can
    then reach is refused), and so is reading another process's /proc entries (the worker's environment).
    The helper already runs with an empty environment (WorkerPool), so it holds no secrets; this keeps a
    scorer that evaluates the model's answer from acting on the host. `lock_load`: the lockdown starts before
    `load` (an installed package's import is plug-in code: its module's top-level code runs locked down too)."""
    memory_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory_bytes:
        # A huge power or allocation fails fast with MemoryError instead of swapping the host.
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    logging.disable(logging.WARNING)
    if lockdown and lock_load:
        _lock_down()
    if load is not None:
        with loading():
            load()
    signal.signal(signal.SIGALRM, _on_alarm)
    if lockdown and not lock_load:
        _lock_down()
    respond({"ready": True})
    _incoming["lines"] = lines = _Lines(0)
    for line in lines:
        try:
            request = json.loads(line)
        except ValueError:
            respond({"outcome": "error", "detail": "malformed request"})
            continue
        if isinstance(request, dict) and "host_answer" in request:
            continue  # the host's answer to a question the request that timed out had asked
        signal.setitimer(signal.ITIMER_REAL, float(request.get("timeout_seconds", 5)))
        try:
            response = evaluate(request)
        except SoftTimeout:
            response = timed_out(request)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        respond(response)


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """A block that imports a package under the lockdown, which then allows what importing numpy does: set the
    helper's own environment and open ctypes' handle on the running process (see ``_lockdown_hook``)."""
    _loading["now"] = True
    try:
        yield
    finally:
        _loading["now"] = False


def _lock_down() -> None:
    sys.dont_write_bytecode = True
    sys.addaudithook(_lockdown_hook)


def ask_host(question: dict) -> dict:
    """Ask the calling process something in the middle of a request (a remote provider's HTTP request, made
    by the host's own code): one ``{"host": ...}`` line out, the host's ``{"host_answer": ...}`` line back.
    Raises EOFError when the host has gone."""
    respond({"host": question})
    for line in _incoming["lines"]:
        answer = json.loads(line)
        if isinstance(answer, dict) and "host_answer" in answer:
            return answer["host_answer"]
    raise EOFError("the host closed the helper's input")


def respond(response: dict) -> None:
    data = (json.dumps(response) + "\n").encode()
    while data:
        data = data[os.write(1, data) :]


class _Lines:
    """Request lines from a raw descriptor: no text-layer buffering between the caller and us. An iterator
    object, not a generator: a request's timeout may interrupt a read in ``ask_host``, and a generator an
    exception passes through is finished, where this one reads on."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise StopIteration
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line
