"""Reading one run's pipes (outputs kept within their caps) and deciding what happened to it."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from engine.sandbox.limits import SandboxLimits

logger = logging.getLogger("engine.sandbox")

STDERR_TAIL_BYTES = 8192
REPORT_CAP_BYTES = 1 << 20
# A run killed by SIGXCPU (or SIGKILL at the hard limit) counts as a CPU timeout only when it
# used most of its CPU limit: under load, rusage can report ~10% less CPU than the kernel counted
# when it sent the signal (seen on a 2-vCPU VM). A program that signals itself to pose as a
# timeout (and dodge a fail) has not used most of its CPU time.
CPU_TIMEOUT_SHARE = 0.75


@dataclass(frozen=True)
class SandboxRun:
    """What happened to one run.

    status: "exited" (normal exit, see exit_code), "signaled" (killed by ``signal``), "timeout"
    (``timeout_reason`` "wall" or "cpu"), "output_limit" (stdout/stderr over the cap) or "error"
    (the sandbox itself failed; ``error`` says how).
    passed: tests mode only; the judge ran every test, reported success with this run's nonce,
    and exited 0. Nothing the program does in its own process can set it.
    events: in tests mode, the judge's reports (syntax_error, program_error, program_died,
    test_failed, passed); in script mode, the program's own (program_error, syntax_error), which
    are only ever used to explain a failure.
    exit_code, signal: the judge's in tests mode, the program's in script mode.
    program_exit_code, program_signal: the program's, in tests mode (None when it was still
    running when the judge finished and the setup process ended it).
    limits: the limits the run had, after the maxima clamped what was asked.
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
    program_exit_code: int | None = None
    program_signal: int | None = None
    limits: SandboxLimits | None = None

    def event(self, name: str) -> dict[str, Any] | None:
        """The first event with this name, if any."""
        for event in self.events:
            if event.get("event") == name:
                return event
        return None


@dataclass
class _Collected:
    stdout: bytearray = field(default_factory=bytearray)
    stderr_tail: bytearray = field(default_factory=bytearray)
    stderr_total: int = 0
    report: bytearray = field(default_factory=bytearray)
    status: bytearray = field(default_factory=bytearray)
    output_exceeded: str = ""
    emergency_killed: bool = False


def collect(read_ends: list[int], *, max_output_bytes: int, deadline: float) -> _Collected:
    """Read the four pipes until the program's exit is reported, keeping outputs within caps."""
    reader = _PipeReader(read_ends, max_output_bytes=max_output_bytes)
    collected = reader.collected
    try:
        while reader.open_fds:
            if reader.exited:
                # The program has exited, so what it wrote is already in the pipes: drain
                # them without waiting for the setup process's own exit and namespace teardown.
                ready = reader.poll.poll(0)
                if not ready:
                    break
                for fd, _ in ready:
                    reader.read(fd)
                continue
            now = time.monotonic()
            if now >= deadline:
                if collected.emergency_killed:
                    break
                _emergency_kill(reader.status_events)
                collected.emergency_killed = True
                deadline = now + 2.0
            for fd, _ in reader.poll.poll(max(0.0, deadline - now) * 1000):
                reader.read(fd)
    finally:
        for fd in list(reader.open_fds):
            reader.finish(fd)
    return collected


class _PipeReader:
    """The run's stdout, stderr, report and status pipes, read into a _Collected within the caps."""

    def __init__(self, read_ends: list[int], *, max_output_bytes: int) -> None:
        self.stdout_fd, self.stderr_fd, self.report_fd, self.status_fd = read_ends
        self.max_output_bytes = max_output_bytes
        self.collected = _Collected()
        self.open_fds = set(read_ends)
        self.status_events: list[dict[str, Any]] = []
        self.exited = False
        # A poll object rather than a selector: no descriptor of its own to create and close per run.
        self.poll = select.poll()
        for fd in read_ends:
            self.poll.register(fd, select.POLLIN)

    def finish(self, fd: int) -> None:
        self.poll.unregister(fd)
        os.close(fd)
        self.open_fds.discard(fd)

    def read(self, fd: int) -> None:
        collected = self.collected
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.finish(fd)
            if fd == self.status_fd and not self.exited:
                self.exited = True  # setup process gone without an exit event: nothing more will come
            return
        if fd == self.stdout_fd:
            collected.stdout += chunk
            if len(collected.stdout) > self.max_output_bytes:
                del collected.stdout[self.max_output_bytes :]
                collected.output_exceeded = "stdout"
                self.finish(fd)  # the program's next write fails with EPIPE
        elif fd == self.stderr_fd:
            collected.stderr_total += len(chunk)
            collected.stderr_tail += chunk
            del collected.stderr_tail[:-STDERR_TAIL_BYTES]
            if collected.stderr_total > self.max_output_bytes:
                collected.output_exceeded = collected.output_exceeded or "stderr"
                self.finish(fd)
        elif fd == self.report_fd:
            if len(collected.report) < REPORT_CAP_BYTES:
                collected.report += chunk
        elif len(collected.status) < REPORT_CAP_BYTES:
            collected.status += chunk
            self.status_events = _parse_lines(collected.status)
            self.exited = self.exited or any(event.get("event") in ("exit", "error") for event in self.status_events)


def _emergency_kill(status_events: list[dict[str, Any]]) -> None:
    """The setup process missed its own deadline (should not happen): kill the run from outside."""
    logger.error("sandbox run outlived its wall-clock limit; killing it from the caller")
    namespaced = any(event.get("namespaced") for event in status_events)
    for event in status_events:
        if event.get("event") != "started":
            continue
        # The setup process: its death ends the program (pid 1 of the run's pid namespace, or
        # with the fallback a process group of its own, killed here too).
        targets = [(os.kill, "supervisor_pid")] + ([] if namespaced else [(os.killpg, "program_pid")])
        for kill, key in targets:
            try:
                kill(int(event[key]), signal.SIGKILL)
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


# Where the server's tempfile.mkdtemp may put a work directory (its TMPDIR is /tmp).
_TEMPORARY_DIRECTORIES = ("/tmp", "/var/tmp", "/usr/tmp")


def orphaned_workdir(collected: _Collected) -> str | None:
    """The fallback's work directory of a run whose setup process died without reporting (it
    removes the directory itself otherwise): only a ``passband-sandbox-*`` directory of a
    temporary directory, as the ``started`` event named it."""
    events = _parse_lines(collected.status)
    if any(event.get("event") in ("exit", "error") for event in events):
        return None
    for event in events:
        workdir = event.get("workdir") if event.get("event") == "started" else None
        if isinstance(workdir, str) and os.path.dirname(workdir) in _TEMPORARY_DIRECTORIES + (tempfile.gettempdir(),):
            if os.path.basename(workdir).startswith("passband-sandbox-"):
                return workdir
    return None


def interpret(collected: _Collected, *, limits: SandboxLimits, nonce: str | None, elapsed: float) -> SandboxRun:
    """The run's outcome from what the pipes carried. Only the status pipe (the setup process,
    and the program before its code starts) can make a run an error. ``elapsed``: seconds since
    the request was sent."""
    status_events = _parse_lines(collected.status)
    report_events = tuple(_parse_lines(collected.report))
    stdout = collected.stdout.decode("utf-8", "replace")
    stderr = collected.stderr_tail.decode("utf-8", "replace")
    common: dict[str, Any] = {"stdout": stdout, "stderr": stderr, "events": report_events, "limits": limits}
    errors = [event for event in status_events if event.get("event") == "error"]
    if errors:
        return SandboxRun(status="error", error=str(errors[0].get("message", "sandbox error")), **common)
    exit_event = next((event for event in status_events if event.get("event") == "exit"), None)
    if exit_event is None:
        started = any(event.get("event") == "started" for event in status_events)
        if started and elapsed >= limits.wall_seconds:
            # The judge's hard kill (a second after the deadline, for what its alarm could not
            # interrupt) or ours: the run was over its wall clock, not a fault of the sandbox.
            return SandboxRun(status="timeout", timeout_reason="wall", **common)
        reason = "killed from the caller after missing its deadline" if collected.emergency_killed else "died"
        return SandboxRun(status="error", error=f"sandbox supervisor {reason} without reporting", **common)
    common.update(
        cpu_seconds=exit_event.get("cpu_seconds"),
        wall_seconds=exit_event.get("wall_seconds"),
        exit_code=exit_event.get("exit_code"),
        program_exit_code=exit_event.get("program_exit_code"),
        program_signal=None if exit_event.get("program_ended_by_supervisor") else exit_event.get("program_signal"),
    )
    killed_by = exit_event.get("signal")
    if collected.output_exceeded:
        error = f"{collected.output_exceeded} exceeded {limits.max_output_bytes} bytes"
        return SandboxRun(status="output_limit", signal=killed_by, error=error, **common)
    if exit_event.get("timed_out"):
        return SandboxRun(status="timeout", timeout_reason="wall", signal=killed_by, **common)
    cpu_limit = max(1, -(-limits.cpu_seconds // 1))
    for signal_number, cpu_seconds in (
        (common["program_signal"], exit_event.get("program_cpu_seconds")),
        (killed_by, exit_event.get("cpu_seconds")),
    ):
        if signal_number in (signal.SIGXCPU, signal.SIGKILL) and (cpu_seconds or 0) >= CPU_TIMEOUT_SHARE * cpu_limit:
            return SandboxRun(status="timeout", timeout_reason="cpu", signal=signal_number, **common)
    passed = (
        nonce is not None
        and common["exit_code"] == 0
        and killed_by is None
        and any(event.get("event") == "passed" and event.get("nonce") == nonce for event in report_events)
    )
    if passed:
        return SandboxRun(status="exited", passed=True, **common)
    if killed_by is not None:
        return SandboxRun(status="signaled", signal=int(killed_by), **common)
    return SandboxRun(status="exited", **common)
