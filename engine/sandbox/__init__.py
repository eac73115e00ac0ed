"""Run untrusted Python programs outside the calling process, isolated and resource-limited.

The calling process (a Celery worker, a trainer, a test) never runs model-written code. It talks
to a fork server (``server.py`` beside this module), a fresh ``python -I -S`` interpreter started with
``subprocess`` and an empty environment, which forks one isolated process tree per run. Using
``subprocess`` rather than ``multiprocessing`` keeps this usable from daemonic Celery prefork
workers; every run has its own pipes, so any number of threads can share one server.

Isolation is detected once per server: Linux namespaces when the kernel allows them (a user
namespace mapping to an unprivileged uid, no network, a read-only filesystem view with a private
/tmp, a private pid namespace), otherwise a weaker fallback. ``Sandbox.isolation()`` says which.

    >>> run = default_sandbox().run_tests(program="def f(): return 1", tests=["assert f() == 1"],
    ...                                   limits=SandboxLimits())
    >>> run.passed
    True
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import select
import selectors
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SERVER_SCRIPT = Path(__file__).with_name("server.py")
SERVER_START_SECONDS = 30.0
# The supervisor enforces the wall-clock limit; the caller steps in only if it did not.
EMERGENCY_GRACE_SECONDS = 5.0
STDERR_TAIL_BYTES = 8192
REPORT_CAP_BYTES = 1 << 20
ISOLATION_CHOICES = ("auto", "namespaces", "fallback")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run. Times in seconds, sizes in bytes."""

    wall_seconds: float = 10.0  # whole run, enforced by the supervisor (process group killed)
    cpu_seconds: float = 10.0  # RLIMIT_CPU per process, rounded up to whole seconds
    memory_bytes: int = 1 << 30  # RLIMIT_AS per process
    max_processes: int = 4  # the program and its children and threads (RLIMIT_NPROC)
    max_open_files: int = 64  # RLIMIT_NOFILE
    max_file_bytes: int = 16 << 20  # RLIMIT_FSIZE: largest file the program may write
    tmp_bytes: int = 64 << 20  # size of the private /tmp (namespaces only)
    max_output_bytes: int = 1 << 20  # stdout (and stderr) beyond this ends the run

    def as_request(self) -> dict[str, float | int]:
        return {
            "wall_seconds": self.wall_seconds,
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "max_processes": self.max_processes,
            "max_open_files": self.max_open_files,
            "max_file_bytes": self.max_file_bytes,
            "tmp_bytes": self.tmp_bytes,
        }


@dataclass(frozen=True)
class SandboxRun:
    """What happened to one run.

    status: "exited" (normal exit, see exit_code), "signaled" (killed by ``signal``), "timeout"
    (``timeout_reason`` "wall" or "cpu"), "output_limit" (stdout/stderr over the cap) or "error"
    (the sandbox itself failed; ``error`` says how).
    passed: tests mode only; the harness reported success with this run's nonce and the program
    then exited 0. An early ``sys.exit(0)`` or ``os._exit(0)`` never sets it.
    events: the harness's reports (syntax_error, program_error, test_failed, passed). They come
    from inside the program's process, so only a ``passed`` carrying the nonce is trusted, and
    only to the extent documented in docs/verifiers.md.
    """

    status: str
    exit_code: int | None = None
    signal: int | None = None
    timeout_reason: str = ""
    stdout: str = ""
    stderr: str = ""
    events: tuple[dict[str, Any], ...] = ()
    passed: bool = False
    cpu_seconds: float | None = None
    wall_seconds: float | None = None
    error: str = ""

    def event(self, name: str) -> dict[str, Any] | None:
        """The first harness event with this name, if any."""
        for event in self.events:
            if event.get("event") == name:
                return event
        return None


class SandboxUnavailable(RuntimeError):
    """The sandbox server could not be started with the requested isolation."""


@dataclass
class _Server:
    process: subprocess.Popen[bytes]
    control: socket.socket
    isolation: dict[str, Any]
    owner_pid: int = field(default_factory=os.getpid)


class Sandbox:
    """A handle on one fork server, started lazily and restarted if it dies.

    isolation: "auto" (namespaces when the kernel allows, else the fallback), "namespaces"
    (fail with SandboxUnavailable rather than run weaker) or "fallback" (force the weak mode;
    for tests and for platforms known to forbid namespaces).
    """

    def __init__(self, *, isolation: str = "auto", python: str | None = None) -> None:
        if isolation not in ISOLATION_CHOICES:
            raise ValueError(f"isolation must be one of {ISOLATION_CHOICES}, got {isolation!r}")
        self.requested_isolation = isolation
        self.python = python or sys.executable or "python3"
        self._lock = threading.Lock()
        self._server: _Server | None = None

    # -- public -----------------------------------------------------------------------------

    def run_tests(self, *, program: str, tests: list[str], limits: SandboxLimits) -> SandboxRun:
        """Run ``program`` as module ``solution``, then each snippet of ``tests`` in its globals.

        Raises SyntaxError when a test snippet does not compile.
        """
        for index, test in enumerate(tests):
            _require_compiles(test, f"<test {index}>")  # a SyntaxError here is the task's, not the program's
        nonce = secrets.token_hex(16)
        request = {"mode": "tests", "program": program, "tests": list(tests), "nonce": nonce}
        return self._run(request, limits, nonce=nonce)

    def run_script(self, *, program: str, stdin: str, limits: SandboxLimits) -> SandboxRun:
        """Run ``program`` as ``__main__`` with ``stdin`` as its standard input."""
        request = {"mode": "script", "program": program, "stdin": stdin}
        return self._run(request, limits, nonce=None)

    def isolation(self) -> dict[str, Any]:
        """What protects the host in this process's server (starting it if needed)."""
        return dict(self._ensure_server().isolation)

    @property
    def server_pid(self) -> int | None:
        """Pid of the running fork server, if any (every run is a descendant of it)."""
        server = self._server
        return server.process.pid if server is not None and server.process.poll() is None else None

    def close(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None and server.owner_pid == os.getpid():
            _stop_server(server)

    # -- server lifecycle -----------------------------------------------------------------

    def _ensure_server(self) -> _Server:
        with self._lock:
            server = self._server
            if server is not None and server.owner_pid != os.getpid():
                # Inherited across fork (Celery prefork): the server belongs to the parent.
                server = self._server = None
            if server is not None and server.process.poll() is None:
                return server
            if server is not None:
                logger.warning("sandbox server exited with %s; starting a new one", server.process.returncode)
                _stop_server(server)
            self._server = self._start()
            return self._server

    def _start(self) -> _Server:
        if self.requested_isolation in ("auto", "namespaces"):
            try:
                server = _start_server(self.python, namespaces=True)
                _self_test(server)
                return server
            except SandboxUnavailable as error:
                if self.requested_isolation == "namespaces":
                    raise
                logger.warning("sandbox: namespaces unavailable (%s); using the fallback isolation", error)
                reason = str(error)
        else:
            reason = "fallback requested"
        server = _start_server(self.python, namespaces=False)
        server.isolation["fallback_reason"] = reason
        _self_test(server)
        return server

    def _send(self, fds: list[int]) -> None:
        for attempt in (1, 2):
            server = self._ensure_server()
            try:
                socket.send_fds(server.control, [b"r"], fds)
                return
            except OSError as error:
                if attempt == 2:
                    raise SandboxUnavailable(f"sandbox server unreachable: {error}") from error
                with self._lock:
                    if self._server is server:
                        _stop_server(server)
                        self._server = None

    # -- one run --------------------------------------------------------------------------

    def _run(self, request: dict[str, Any], limits: SandboxLimits, *, nonce: str | None) -> SandboxRun:
        return _execute(self._send, request, limits, nonce=nonce)


def _execute(
    send: Callable[[list[int]], None], request: dict[str, Any], limits: SandboxLimits, *, nonce: str | None
) -> SandboxRun:
    """One run: the request in a memfd, four fresh pipes, ``send`` hands them to a server."""
    request["limits"] = limits.as_request()
    started = time.monotonic()
    request_fd = os.memfd_create("passband-sandbox-request", os.MFD_CLOEXEC)
    pipes = [os.pipe() for _ in range(4)]  # stdout, stderr, report, status
    try:
        _write_all(request_fd, json.dumps(request).encode())
        try:
            send([request_fd] + [write_end for _, write_end in pipes])
        except SandboxUnavailable as error:
            for read_end, _ in pipes:
                os.close(read_end)
            return SandboxRun(status="error", error=str(error))
    finally:
        os.close(request_fd)
        for _, write_end in pipes:
            os.close(write_end)
    collected = _collect(
        [read_end for read_end, _ in pipes],
        max_output_bytes=limits.max_output_bytes,
        deadline=started + limits.wall_seconds + EMERGENCY_GRACE_SECONDS,
    )
    return _interpret(collected, limits=limits, nonce=nonce)


# -- process-wide default ---------------------------------------------------------------------

_default_lock = threading.Lock()
_default: Sandbox | None = None


def default_sandbox() -> Sandbox:
    """The sandbox shared by everything in this process (one fork server per process)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Sandbox(isolation=os.environ.get("PASSBAND_SANDBOX_ISOLATION", "auto"))
        return _default


def _forget_default_after_fork() -> None:
    global _default, _default_lock
    _default = None
    _default_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_default_after_fork)


# -- helpers ---------------------------------------------------------------------------------


def _start_server(python: str, *, namespaces: bool) -> _Server:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    options = json.dumps(
        {"control_fd": theirs.fileno(), "namespaces": namespaces, "site_packages": _site_packages(python)}
    )
    try:
        process = subprocess.Popen(
            [python, "-I", "-S", str(SERVER_SCRIPT), options],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env={},  # nothing of the worker's environment reaches the programs
            cwd="/",
            pass_fds=[theirs.fileno()],
        )
    except OSError as error:
        ours.close()
        raise SandboxUnavailable(f"could not start {python}: {error}") from error
    finally:
        theirs.close()
    assert process.stdout is not None
    line = _read_line(process.stdout.fileno(), timeout=SERVER_START_SECONDS)
    process.stdout.close()
    try:
        ready = json.loads(line) if line else {}
    except ValueError:
        ready = {}
    if not ready.get("ready"):
        process.kill()
        process.wait()
        ours.close()
        reason = ready.get("error") or f"server did not start (output {line[:200]!r})"
        raise SandboxUnavailable(reason)
    isolation = _describe_isolation(namespaces=namespaces, user=str(ready.get("user", "")))
    return _Server(process=process, control=ours, isolation=isolation)


def _site_packages(python: str) -> list[str]:
    """Where the sandboxed programs find installed packages (numpy...): the interpreter's
    site-packages, asked from that interpreter when it is not this one."""
    if python == sys.executable:
        paths = sysconfig.get_paths()
        return sorted({paths["purelib"], paths["platlib"]})
    try:
        output = subprocess.run(
            [
                python,
                "-I",
                "-c",
                "import sysconfig, json; p = sysconfig.get_paths(); "
                "print(json.dumps(sorted({p['purelib'], p['platlib']})))",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={},
            check=True,
        ).stdout
        return list(json.loads(output))
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


def _self_test(server: _Server) -> None:
    """One trivial run through the real path: proves the kernel let the run's setup happen."""

    def send(fds: list[int]) -> None:
        try:
            socket.send_fds(server.control, [b"r"], fds)
        except OSError as error:
            raise SandboxUnavailable(f"sandbox server unreachable: {error}") from error

    request = {"mode": "script", "program": "print(6 * 7)", "stdin": ""}
    run = _execute(send, request, SandboxLimits(wall_seconds=20), nonce=None)
    if run.status != "exited" or run.exit_code != 0 or run.stdout.strip() != "42":
        _stop_server(server)
        raise SandboxUnavailable(f"self-test run failed: {run.status} {run.error or run.stderr[-300:]}")


def _stop_server(server: _Server) -> None:
    try:
        server.control.close()  # EOF makes the server exit
    except OSError:
        pass
    try:
        server.process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def _describe_isolation(*, namespaces: bool, user: str) -> dict[str, Any]:
    if namespaces:
        return {
            "mode": "namespaces",
            "user": f"{user}; each run gets its own user namespace (uid {1000} inside, no capabilities, no_new_privs)",
            "network": "new network namespace per run with no interface up: no network at all, not even 127.0.0.1",
            "filesystem": (
                "read-only view of system and Python directories only; private tmpfs /tmp (the cwd) and /dev/shm"
            ),
            "processes": "own pid namespace (killed as a whole when the run ends); RLIMIT_NPROC counted per run",
            "environment": "empty (a fixed minimal PATH/HOME/LANG)",
        }
    return {
        "mode": "fallback",
        "user": "same uid as the worker",
        "network": "NOT isolated by the kernel; a Python audit hook refuses socket creation",
        "filesystem": (
            "NOT isolated by the kernel; cwd is a private temporary directory, the audit hook refuses writes elsewhere"
        ),
        "processes": "new session, killed as a group; the audit hook refuses fork/exec/kill; RLIMIT_NPROC not applied",
        "environment": "empty (a fixed minimal PATH/HOME/LANG)",
    }


@functools.lru_cache(maxsize=1024)
def _require_compiles(source: str, filename: str) -> None:
    compile(source, filename, "exec")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_line(fd: int, *, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    buffer = b""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
    return buffer.split(b"\n", 1)[0].decode("utf-8", "replace")


@dataclass
class _Collected:
    stdout: bytearray = field(default_factory=bytearray)
    stderr_tail: bytearray = field(default_factory=bytearray)
    stderr_total: int = 0
    report: bytearray = field(default_factory=bytearray)
    status: bytearray = field(default_factory=bytearray)
    output_exceeded: str = ""
    emergency_killed: bool = False


def _collect(read_ends: list[int], *, max_output_bytes: int, deadline: float) -> _Collected:
    """Read the four pipes until the program's exit is reported, keeping outputs within caps."""
    stdout_fd, stderr_fd, report_fd, status_fd = read_ends
    collected = _Collected()
    open_fds = set(read_ends)
    status_events: list[dict[str, Any]] = []
    exited = False
    with selectors.DefaultSelector() as selector:
        for fd in read_ends:
            selector.register(fd, selectors.EVENT_READ)

        def finish(fd: int) -> None:
            selector.unregister(fd)
            os.close(fd)
            open_fds.discard(fd)

        def read_from(fd: int) -> None:
            nonlocal status_events, exited
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                finish(fd)
                if fd == status_fd and not exited:
                    exited = True  # supervisor gone without an exit event: nothing more will come
                return
            if fd == stdout_fd:
                collected.stdout += chunk
                if len(collected.stdout) > max_output_bytes:
                    del collected.stdout[max_output_bytes:]
                    collected.output_exceeded = "stdout"
                    finish(fd)  # the program's next write fails with EPIPE
            elif fd == stderr_fd:
                collected.stderr_total += len(chunk)
                collected.stderr_tail += chunk
                del collected.stderr_tail[:-STDERR_TAIL_BYTES]
                if collected.stderr_total > max_output_bytes:
                    collected.output_exceeded = collected.output_exceeded or "stderr"
                    finish(fd)
            elif fd == report_fd:
                if len(collected.report) < REPORT_CAP_BYTES:
                    collected.report += chunk
            else:
                collected.status += chunk
                status_events = _parse_lines(collected.status)
                exited = exited or any(event.get("event") in ("exit", "error") for event in status_events)

        try:
            while open_fds:
                if exited:
                    # The program has exited, so what it wrote is already in the pipes: drain
                    # them without waiting for the supervisor's own exit and namespace teardown.
                    ready = selector.select(timeout=0)
                    if not ready:
                        break
                    for key, _ in ready:
                        read_from(key.fd)
                    continue
                now = time.monotonic()
                if now >= deadline:
                    if collected.emergency_killed:
                        break
                    _emergency_kill(status_events)
                    collected.emergency_killed = True
                    deadline = now + 2.0
                for key, _ in selector.select(timeout=max(0.0, deadline - now)):
                    read_from(key.fd)
        finally:
            for fd in list(open_fds):
                finish(fd)
    return collected


def _emergency_kill(status_events: list[dict[str, Any]]) -> None:
    """The supervisor missed its own deadline (should not happen): kill the run from outside."""
    logger.error("sandbox run outlived its wall-clock limit; killing it from the caller")
    namespaced = any(event.get("namespaced") for event in status_events)
    for event in status_events:
        try:
            if event.get("event") == "started":
                # The supervisor is pid 1 of the run's pid namespace: killing it ends them all.
                os.kill(int(event["supervisor_pid"]), signal.SIGKILL)
            elif event.get("event") == "program_started" and not namespaced:
                os.killpg(int(event["program_pid"]), signal.SIGKILL)
        except (OSError, ValueError, KeyError, TypeError):
            pass


def _parse_lines(data: bytes | bytearray) -> list[dict[str, Any]]:
    events = []
    for line in bytes(data).split(b"\n"):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _interpret(collected: _Collected, *, limits: SandboxLimits, nonce: str | None) -> SandboxRun:
    status_events = _parse_lines(collected.status)
    report_events = tuple(_parse_lines(collected.report))
    stdout = collected.stdout.decode("utf-8", "replace")
    stderr = collected.stderr_tail.decode("utf-8", "replace")
    common = {"stdout": stdout, "stderr": stderr, "events": report_events}
    # Only the status pipe (setup process, supervisor, program before the untrusted code starts)
    # can make a run an error; the report pipe is writable by the program.
    errors = [event for event in status_events if event.get("event") == "error"]
    if errors:
        return SandboxRun(status="error", error=str(errors[0].get("message", "sandbox error")), **common)
    exit_event = next((event for event in status_events if event.get("event") == "exit"), None)
    if exit_event is None:
        reason = "killed from the caller after missing its deadline" if collected.emergency_killed else "died"
        return SandboxRun(status="error", error=f"sandbox supervisor {reason} without reporting", **common)
    cpu_seconds = exit_event.get("cpu_seconds")
    wall_seconds = exit_event.get("wall_seconds")
    measured = {"cpu_seconds": cpu_seconds, "wall_seconds": wall_seconds}
    exit_code = exit_event.get("exit_code")
    killed_by = exit_event.get("signal")
    if collected.output_exceeded:
        return SandboxRun(
            status="output_limit",
            exit_code=exit_code,
            signal=killed_by,
            error=f"{collected.output_exceeded} exceeded {limits.max_output_bytes} bytes",
            **measured,
            **common,
        )
    if exit_event.get("timed_out"):
        return SandboxRun(status="timeout", timeout_reason="wall", signal=killed_by, **measured, **common)
    cpu_limit = max(1, -(-limits.cpu_seconds // 1))
    # Under load, rusage can report ~10% less CPU than the kernel counted when it sent SIGXCPU
    # (seen on a 2-vCPU VM), hence the slack; a program that signals itself to pose as a CPU
    # timeout (and so dodge a fail) has not used most of its CPU time.
    if killed_by in (signal.SIGXCPU, signal.SIGKILL) and (cpu_seconds or 0) >= 0.75 * cpu_limit:
        return SandboxRun(status="timeout", timeout_reason="cpu", signal=killed_by, **measured, **common)
    if killed_by is not None:
        return SandboxRun(status="signaled", signal=int(killed_by), **measured, **common)
    passed = (
        nonce is not None
        and exit_code == 0
        and any(event.get("event") == "passed" and event.get("nonce") == nonce for event in report_events)
    )
    return SandboxRun(status="exited", exit_code=exit_code, passed=passed, **measured, **common)
