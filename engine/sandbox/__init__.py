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

import binascii
import functools
import importlib.util
import json
import logging
import marshal
import os
import secrets
import select
import shutil
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

from engine.sandbox.limits import SandboxLimits, SandboxMaxima
from engine.sandbox.outcome import SandboxRun, collect, interpret, orphaned_workdir

__all__ = ["Sandbox", "SandboxLimits", "SandboxMaxima", "SandboxRun", "SandboxUnavailable", "default_sandbox"]

logger = logging.getLogger(__name__)

SERVER_SCRIPT = Path(__file__).with_name("server.py")
SERVER_START_SECONDS = 30.0
# The setup process enforces the wall-clock limit; the caller steps in only if it did not.
EMERGENCY_GRACE_SECONDS = 5.0
ISOLATION_CHOICES = ("auto", "namespaces", "fallback")


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
    for tests and for platforms known to forbid namespaces). view: an ``engine.sandbox.view.SandboxView``
    (which Python the runs see; None: the interpreter's installed packages); raises its
    MissingDistribution when it names a distribution that is not installed.
    """

    def __init__(
        self,
        *,
        isolation: str = "auto",
        python: str | None = None,
        maxima: SandboxMaxima | None = None,
        view: Any = None,
    ) -> None:
        if isolation not in ISOLATION_CHOICES:
            raise ValueError(f"isolation must be one of {ISOLATION_CHOICES}, got {isolation!r}")
        self.requested_isolation = isolation
        self.maxima = maxima or SandboxMaxima.from_environment()
        self.python = python or sys.executable or "python3"
        restricted = view is not None and not view.installed_packages
        self.view_options = {"restricted": restricted, "packages": view.entries() if restricted else []}
        self._lock = threading.Lock()
        self._server: _Server | None = None

    # -- public -----------------------------------------------------------------------------

    def run_tests(
        self,
        *,
        program: str,
        tests: list[str],
        limits: SandboxLimits,
        prelude: str = "",
        entry_point: str | None = None,
    ) -> SandboxRun:
        """Run ``program`` as module ``solution`` in one process and ``tests`` in another.

        The tests run in order in one namespace, after ``prelude`` (task code, e.g. HumanEval's
        prompt with its helpers). With ``entry_point`` only that name is taken from the program;
        otherwise every name it defines that does not shadow a builtin. The program's functions
        are called over a pipe and their results come back by value, so the verdict is decided
        outside the program's interpreter. Raises SyntaxError when a test snippet does not compile.
        """
        # A SyntaxError here is the task's, not the program's. The judge gets the compiled code
        # too (compiled once per task in this process, not once per run in the judge).
        compiled = [_compiled(test, f"<test {index}>") for index, test in enumerate(tests)]
        nonce = secrets.token_hex(16)
        request = {"mode": "tests", "program": program}
        judge_request = {
            "tests": list(tests),
            "prelude": prelude,
            "entry_point": entry_point,
            "nonce": nonce,
            "compiled": {
                "magic": _BYTECODE_MAGIC,
                "tests": compiled,
                "prelude": _compiled(prelude, "<prelude>") if prelude else None,
            },
        }
        return self._run(request, judge_request, limits, nonce=nonce)

    def run_script(self, *, program: str, stdin: str, limits: SandboxLimits) -> SandboxRun:
        """Run ``program`` as ``__main__`` with ``stdin`` as its standard input."""
        request = {"mode": "script", "program": program, "stdin": stdin}
        return self._run(request, {}, limits, nonce=None)

    def open_session(self, *, program: str, limits: SandboxLimits, lifetime_seconds: float) -> Any:
        """Start ``program`` as a long-lived run answering requests line by line (engine/sandbox/session.py):
        the same isolation and view as ``run_script``; ``limits`` apply for its whole life, which ends when the
        session is closed or after ``lifetime_seconds``. Returns a SandboxSession; raises its SessionEnded."""
        from engine.sandbox.session import open_session

        return open_session(
            self._send, program=program, limits=self.maxima.clamp(limits), lifetime_seconds=lifetime_seconds
        )

    def isolation(self) -> dict[str, Any]:
        """What protects the host in this process's server (starting it if needed)."""
        return dict(self._ensure_server().isolation)

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
                server = _start_server(self.python, namespaces=True, maxima=self.maxima, view=self.view_options)
                _self_test(server)
                return server
            except SandboxUnavailable as error:
                if self.requested_isolation == "namespaces":
                    raise
                logger.warning("sandbox: namespaces unavailable (%s); using the fallback isolation", error)
                reason = str(error)
        else:
            reason = "fallback requested"
        server = _start_server(self.python, namespaces=False, maxima=self.maxima, view=self.view_options)
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

    def _run(
        self, request: dict[str, Any], judge_request: dict[str, Any], limits: SandboxLimits, *, nonce: str | None
    ) -> SandboxRun:
        return _execute(self._send, request, judge_request, self.maxima.clamp(limits), nonce=nonce)


def _execute(
    send: Callable[[list[int]], None],
    request: dict[str, Any],
    judge_request: dict[str, Any],
    limits: SandboxLimits,
    *,
    nonce: str | None,
) -> SandboxRun:
    """One run: the two requests in memfds, four fresh pipes, ``send`` hands them to a server."""
    request["limits"] = limits.as_request()
    started = time.monotonic()
    request_fds = [os.memfd_create(name, os.MFD_CLOEXEC) for name in ("passband-program", "passband-judge")]
    pipes = [os.pipe() for _ in range(4)]  # stdout, stderr, report, status
    try:
        _write_all(request_fds[0], json.dumps(request).encode())
        if judge_request:
            _write_all(request_fds[1], json.dumps(judge_request).encode())
        try:
            send(request_fds + [write_end for _, write_end in pipes])
        except SandboxUnavailable as error:
            for read_end, _ in pipes:
                os.close(read_end)
            return SandboxRun(status="error", error=str(error), limits=limits)
    finally:
        for fd in request_fds:
            os.close(fd)
        for _, write_end in pipes:
            os.close(write_end)
    collected = collect(
        [read_end for read_end, _ in pipes],
        max_output_bytes=limits.max_output_bytes,
        deadline=started + limits.wall_seconds + EMERGENCY_GRACE_SECONDS,
    )
    workdir = orphaned_workdir(collected)
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
    return interpret(collected, limits=limits, nonce=nonce, elapsed=time.monotonic() - started)


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


def _start_server(python: str, *, namespaces: bool, maxima: SandboxMaxima, view: dict[str, Any]) -> _Server:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    options = json.dumps(
        {
            "control_fd": theirs.fileno(),
            "namespaces": namespaces,
            "site_packages": [] if view["restricted"] else _site_packages(python),
            "maxima": maxima.as_options(),
            "view": view,
        }
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
    isolation["python"] = (
        f"standard library and {len(view['packages'])} package entries only"
        if view["restricted"]
        else "installed packages"
    )
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
    run = _execute(send, request, {}, SandboxLimits(wall_seconds=20), nonce=None)
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
            "user": (
                f"{user}; each run gets its own user namespace (uid {1000} inside, no capabilities, no_new_privs, "
                "no nested user namespace)"
            ),
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


_BYTECODE_MAGIC = importlib.util.MAGIC_NUMBER.hex()


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, filename: str) -> str:
    """``source`` compiled, marshalled, in base64 (the judge uses it when its interpreter's
    bytecode matches ours). Raises SyntaxError. Always with asserts: a caller running under
    ``python -O`` (or PYTHONOPTIMIZE) would otherwise strip every assert from the tests."""
    code = compile(source, filename, "exec", dont_inherit=True, optimize=0)
    return binascii.b2a_base64(marshal.dumps(code), newline=False).decode()


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
