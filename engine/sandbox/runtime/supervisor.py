"""One run of the sandbox: setup process (judge and watchdog) -> program.

Standard library only; loaded by server.py before the server isolates itself.

Descriptors a run receives (in this order): the program's request (a memfd: program, stdin,
limits, mode), the judge's request (a memfd: prelude, tests, entry point, nonce; empty for
scripts; in ``session`` mode the read end of the caller's request pipe, which becomes the program's
stdin, and whose closing ends the run), the write ends of stdout, stderr, the report pipe and the
status pipe.

The setup process creates the run's namespaces and forks the **program** before any request
exists; with namespaces the program is pid 1 of the run's pid namespace, so its exit takes
every process it started with it, and the setup process, outside that namespace, is out of its
sight: the program can neither signal it nor open it through /proc. When the request comes,
the setup process hands the program its descriptors, enforces the wall clock and reports how
the run ended. In ``tests`` mode it is also the **judge**: only after the program was forked
does it read its own request (so the tests, the expected values and the nonce never exist in
the program's memory), and it runs the tests, calling the program's functions over two pipes.
Only it holds the report pipe, and it is non-dumpable.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import tempfile
import time
from typing import NoReturn

from . import audit, isolation, views
from .isolation import SetupError

DEFAULT_TMP_BYTES = 64 << 20
REQUEST_FDS = 6
PROGRAM_EXIT_GRACE_SECONDS = 1.0
SESSION_MAX_SECONDS = 3600.0
ALARM_REPEAT_SECONDS = 0.25
JUDGE_KILL_GRACE_SECONDS = 1.0
_os_exit = os._exit
_os_write = os.write
_json_dumps = json.dumps


def write_status(fd: int, **event: object) -> None:
    try:
        _os_write(fd, (_json_dumps(event) + "\n").encode())
    except OSError:
        pass


def prepare_spare(channel: socket.socket, namespaced: bool, maxima: dict) -> None:
    """Setup process of a spare sandbox (forked by the server ahead of any request). Never returns.

    Creates the run's namespaces and private mounts and forks the program, which waits for its
    descriptors; then waits for one request and runs it. A setup failure is not lost: the
    request still comes, and the failure is reported on its status pipe.
    """
    isolation.name_process("pb-setup")
    failure = workdir = ""
    program: tuple[int, socket.socket] | None = None
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server's SIG_IGN would reap our children
        isolation.close_fds_except({channel.fileno(), 2})
        os.setsid()
        if namespaced:
            isolation.unshare_user_namespace(isolation.SANDBOX_UID)
            views.refuse_nested_user_namespaces()
            flags = isolation.CLONE_NEWNET | isolation.CLONE_NEWNS | isolation.CLONE_NEWPID
            isolation._check(
                isolation.libc.unshare(flags | isolation.CLONE_NEWIPC | isolation.CLONE_NEWUTS), "unshare namespaces"
            )
            tmpfs = isolation.MS_NOSUID | isolation.MS_NODEV
            isolation.mount_private_tmp(DEFAULT_TMP_BYTES)
            isolation.mount("tmpfs", "/dev/shm", "tmpfs", tmpfs, "mode=0755,size=16m,nr_inodes=256")
        # Non-dumpable before anything secret exists: no process of the same uid may ptrace us
        # or open our memory and descriptors through /proc (the program inherits it too).
        isolation.libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
        workdir = "/tmp" if namespaced else tempfile.mkdtemp(prefix="passband-sandbox-")
        program = _prefork_program(channel, namespaced, maxima, workdir)
        _prepare_process(workdir, namespaced)
    except BaseException as error:  # noqa: BLE001
        failure = f"sandbox setup failed: {error}"
    try:
        message, fds, _flags, _address = socket.recv_fds(channel, 16, 8)
    except OSError:
        _leave(0, workdir, namespaced)
    channel.close()
    if not message or len(fds) != REQUEST_FDS:
        _leave(0, workdir, namespaced)  # the server went away (the program sees its socket close and exits)
    status_fd = fds[5]
    try:
        if failure or program is None:
            raise SetupError(failure or "sandbox setup failed")
        request = read_request(fds[0])
        request["limits"] = isolation.clamp_limits(request["limits"], maxima)
        tmp_bytes = int(request["limits"]["tmp_bytes"])
        if namespaced and tmp_bytes != DEFAULT_TMP_BYTES:
            flags = isolation.MS_REMOUNT | isolation.MS_NOSUID | isolation.MS_NODEV
            isolation.mount(None, "/tmp", None, flags, f"size={tmp_bytes}")
    except BaseException as error:  # noqa: BLE001
        reason = str(error) if isinstance(error, SetupError) else f"sandbox setup failed: {error}"
        write_status(status_fd, event="error", message=reason)
        _leave(1, workdir, namespaced)
    assert program is not None  # SetupError above otherwise
    supervise(request, fds, namespaced, program, workdir)


def _leave(code: int, workdir: str, namespaced: bool) -> NoReturn:
    """Exit, removing the fallback's work directory (with namespaces it is the run's own tmpfs)."""
    if workdir and not namespaced:
        shutil.rmtree(workdir, ignore_errors=True)
    _os_exit(code)


def read_request(fd: int) -> dict:
    """The JSON request in a memfd (the descriptor stays open)."""
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return json.loads(b"".join(chunks) or b"{}")


def _prefork_program(channel: socket.socket, namespaced: bool, maxima: dict, workdir: str) -> tuple[int, socket.socket]:
    """Fork the program, which does what it can before the request and waits for its
    descriptors; returns its pid and the socket that hands them."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        isolation.name_process("pb-program")
        failure = ""
        try:
            ours.close()
            channel.close()
            # If the setup process dies, so does the program (and, as pid 1, its namespace).
            isolation.libc.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.setpgid(0, 0)
            if namespaced:
                _mount_proc()
                isolation.drop_capabilities()
            _prepare_process(workdir, namespaced)
        except BaseException as error:  # noqa: BLE001
            failure = f"sandbox setup failed: {error}"
        try:
            message, fds, _flags, _address = socket.recv_fds(theirs, 16, 16)
        except BaseException:  # noqa: BLE001 - no request will come
            _os_exit(0)
        if not message or not fds:
            _os_exit(0)  # the setup process went away
        theirs.close()
        if failure:
            write_status(fds[-1], event="error", message=failure)
            _os_exit(1)
        _become_program(fds, workdir, namespaced, maxima)
    theirs.close()
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it, or is gone
    return pid, ours


def _prepare_process(workdir: str, namespaced: bool) -> None:
    """Before the request, in the program and in the setup process (the judge): the work
    directory and a random stream of its own (forked from one server, every run would otherwise
    share one)."""
    os.chdir(workdir)
    if not namespaced:
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir
    import random

    random.seed()


def _mount_proc() -> None:
    """A /proc of the run's own pid namespace (we are its pid 1), hiding the host's processes."""
    proc_flags = isolation.MS_NOSUID | isolation.MS_NODEV | isolation.MS_NOEXEC
    try:
        isolation.mount("proc", "/proc", "proc", proc_flags)
    except SetupError:
        # Some container runtimes mask parts of /proc, which forbids a new proc mount;
        # hide the server's /proc (host processes) behind an empty tmpfs instead.
        isolation.mount("tmpfs", "/proc", "tmpfs", proc_flags, "size=4k")


class _Deadline(BaseException):
    """The run's wall clock ran out while the judge was running the tests."""


def supervise(
    request: dict, fds: list[int], namespaced: bool, program: tuple[int, socket.socket], workdir: str
) -> None:
    """Hand the program its descriptors, judge (tests mode) or wait for it (script mode) within
    the wall clock, and report how the run ended. Never returns."""
    program_request_fd, judge_request_fd, stdout_fd, stderr_fd, report_fd, status_fd = fds
    limits = request["limits"]
    testing = request["mode"] == "tests"
    program_pid, program_socket = program
    try:
        if testing:
            calls_read, calls_write = os.pipe()
            replies_read, replies_write = os.pipe()
            program_fds = [stdout_fd, stderr_fd, calls_read, replies_write, program_request_fd, status_fd]
            socket.send_fds(program_socket, [b"t"], program_fds)
            os.close(calls_read)
            os.close(replies_write)
        elif request["mode"] == "session":
            # The judge's memfd is the read end of the caller's request pipe: the program's stdin.
            program_fds = [stdout_fd, stderr_fd, report_fd, judge_request_fd, program_request_fd, status_fd]
            socket.send_fds(program_socket, [b"s"], program_fds)
        else:
            socket.send_fds(program_socket, [b"s"], [stdout_fd, stderr_fd, report_fd, program_request_fd, status_fd])
        program_socket.close()
        started = time.monotonic()
        started_event: dict[str, object] = {
            "supervisor_pid": os.getpid(),
            "program_pid": program_pid,
            "namespaced": namespaced,
        }
        if not namespaced:
            started_event["workdir"] = workdir  # for the caller to remove if we die without reporting
        write_status(status_fd, event="started", **started_event)
        os.close(program_request_fd)
        if testing:
            judge_request = read_request(judge_request_fd)
            os.close(judge_request_fd)
            # The judge's descriptors: 0 empty stdin, 1 stdout, 2 stderr, 3 report, 4 replies
            # in, 5 calls out, 6 status (ours, not the tests').
            status_fd = _arrange_fds([stdout_fd, stderr_fd, report_fd, replies_read, calls_write, status_fd])
            isolation.apply_limits(limits, namespaced, judge=True)
            if namespaced:
                isolation.drop_capabilities()
            deadline = started + float(limits["wall_seconds"])
            # What the judge's alarm cannot interrupt (a long call into C, a test that ignores
            # SIGALRM) ends with the judge killed a second later; the caller then reports the
            # run as over its wall clock.
            killer = isolation.kill_self_after(max(deadline - time.monotonic(), 0.0) + JUDGE_KILL_GRACE_SECONDS)
            if not namespaced:
                audit.install_audit_guard(workdir, may_kill=program_pid, may_disarm=True)
            result = _judge(judge_request, program_pid, deadline, killer)
        elif request["mode"] == "session":
            for fd in (stdout_fd, stderr_fd, report_fd):
                os.close(fd)
            # A session lives until the caller closes its request pipe (or dies), or its lifetime ends.
            lifetime = min(float(request.get("lifetime_seconds") or 0), SESSION_MAX_SECONDS)
            wait_status, usage, timed_out = _wait_with_deadline(
                program_pid, started + max(lifetime, float(limits["wall_seconds"])), hangup_fd=judge_request_fd
            )
            result = {"event": "exit", "timed_out": timed_out, **_ending(wait_status, usage)}
        else:
            for fd in (judge_request_fd, stdout_fd, stderr_fd, report_fd):
                os.close(fd)
            wait_status, usage, timed_out = _wait_with_deadline(program_pid, started + float(limits["wall_seconds"]))
            result = {"event": "exit", "timed_out": timed_out, **_ending(wait_status, usage)}
        result["wall_seconds"] = round(time.monotonic() - started, 4)
        write_status(status_fd, **result)
        _leave(0, workdir, namespaced)
    except BaseException as error:  # noqa: BLE001
        _kill_group(program_pid)
        write_status(status_fd, event="error", message=f"sandbox supervisor failed: {error}")
        _leave(1, workdir, namespaced)


def _judge(request: dict, program_pid: int, deadline: float, killer: ctypes.c_void_p) -> dict[str, object]:
    """Run the tests against the program within the wall clock; the run's exit event. ``killer``:
    the kernel timer that kills this process a little after the deadline, disarmed here."""
    from . import judge

    state = {"active": True, "timed_out": False}

    def on_alarm(_signum: int, _frame: object) -> None:
        # Again every ALARM_REPEAT_SECONDS after the first: a test that catches one gets the next.
        if state["active"]:
            if not state["timed_out"]:
                state["timed_out"] = True
                _kill_group(program_pid)
            raise _Deadline

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001), ALARM_REPEAT_SECONDS)
    usage_before = os.times()
    try:
        try:
            event, code = judge.run_judge(request, stop=_Deadline)
        finally:
            state["active"] = False  # from here on the alarm raises nothing
    except _Deadline:
        event, code = {}, 1
    signal.setitimer(signal.ITIMER_REAL, 0)
    isolation.disarm(killer)
    timed_out = state["timed_out"]
    if event and not timed_out:
        judge.report(event)
    usage = os.times()
    result: dict[str, object] = {
        "event": "exit",
        "timed_out": timed_out,
        "exit_code": code,
        "cpu_seconds": round(usage.user + usage.system - usage_before.user - usage_before.system, 4),
    }
    # Close our ends of the channel: a program left waiting for a call exits by itself. One
    # that passed needs nothing more; one that failed gets a moment to tell how it ended.
    for fd in (judge.REPLIES_FD, judge.CALLS_FD):
        try:
            os.close(fd)
        except OSError:
            pass
    ending = _end_program(program_pid, 0.0 if code == 0 or timed_out else PROGRAM_EXIT_GRACE_SECONDS)
    result.update({f"program_{key}": value for key, value in ending.items()})
    return result


def _ending(wait_status: int, usage) -> dict[str, object]:
    ending: dict[str, object] = {"cpu_seconds": round(usage.ru_utime + usage.ru_stime, 4)}
    if os.WIFSIGNALED(wait_status):
        ending["signal"] = os.WTERMSIG(wait_status)
    else:
        ending["exit_code"] = os.waitstatus_to_exitcode(wait_status)
    return ending


def _end_program(pid: int, grace: float) -> dict[str, object]:
    """The program of a tests run, after the judge finished: how it ended, or that we ended it.

    The judge may see the program's pipes close a moment before the program can be waited for
    (descriptors close early in an exit), and a program whose judge closed the channel exits by
    itself: wait a moment before ending it."""
    if grace > 0:
        try:
            pidfd = os.pidfd_open(pid)
            select.select([pidfd], [], [], grace)
            os.close(pidfd)
        except (AttributeError, OSError):
            pass
    finished, wait_status, usage = os.wait4(pid, os.WNOHANG)
    if finished:
        return _ending(wait_status, usage)
    _kill_group(pid)
    _, wait_status, usage = os.wait4(pid, 0)
    return {**_ending(wait_status, usage), "ended_by_supervisor": True}


def _wait_with_deadline(pid: int, deadline: float, hangup_fd: int | None = None) -> tuple[int, object, bool]:
    """wait4 with a deadline; on expiry kill the program. Returns (status, rusage, timed_out). With
    ``hangup_fd`` (a pipe's read end), the program is killed too once every write end is closed."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    poller = select.poll()
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    if hangup_fd is not None:
        poller.register(hangup_fd, 0)  # no interest in data: only POLLHUP (the caller is done) wakes us
    while True:
        finished, wait_status, usage = os.wait4(pid, os.WNOHANG)
        if finished:
            return wait_status, usage, False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill_group(pid)
            _, wait_status, usage = os.wait4(pid, 0)
            return wait_status, usage, True
        step = remaining if pidfd is not None else min(remaining, 0.005)
        for fd, _events in poller.poll(step * 1000):
            if fd == hangup_fd:
                _kill_group(pid)
                _, wait_status, usage = os.wait4(pid, 0)
                return wait_status, usage, False


def _kill_group(pid: int) -> None:
    """End the program: with namespaces it is pid 1 of the run, and its death ends them all."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def _arrange_fds(fds: list[int], stdin: bytes = b"", stdin_fd: int | None = None) -> int:
    """Make ``fds`` descriptors 1, 2, 3... with a memfd holding ``stdin`` (or ``stdin_fd``) as 0, close
    every other descriptor, and return the number of the last one."""
    if stdin_fd is None:
        stdin_fd = os.memfd_create("stdin")
    if stdin:
        os.write(stdin_fd, stdin)
        os.lseek(stdin_fd, 0, os.SEEK_SET)
    # Move every source above the targets first so no dup2 overwrites a source still needed.
    sources = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in [stdin_fd, *fds]]
    for target, source in enumerate(sources):
        os.dup2(source, target)
    isolation.close_fds_except(set(range(len(sources))))
    return len(sources) - 1


def _become_program(fds: list[int], workdir: str, namespaced: bool, maxima: dict) -> None:
    """The program, handed its descriptors: limits, then the harness. Never returns.

    Descriptors: 0 stdin, 1 stdout, 2 stderr, then (tests) 3 calls in, 4 replies out or
    (script) 3 report; it is handed its request too, read and closed here. The status pipe
    comes last and is closed before any untrusted code runs.
    """
    status_target = fds[-1]  # where a setup failure is reported; moves with the others
    try:
        request_fd = fds.pop(-2)
        request = read_request(request_fd)
        os.close(request_fd)
        limits = isolation.clamp_limits(request["limits"], maxima)
        stdin_pipe = fds.pop(-2) if request["mode"] == "session" else None
        status_target = _arrange_fds(fds, request.get("stdin", "").encode(), stdin_fd=stdin_pipe)
        isolation.apply_limits(limits, namespaced, judge=False)
    except BaseException as error:  # noqa: BLE001
        # Reported on the status pipe: nothing the program writes may turn a run into an error.
        write_status(status_target, event="error", message=f"sandbox program setup failed: {error}")
        _os_exit(1)
    os.close(status_target)
    if not namespaced:
        audit.install_audit_guard(workdir)
    from . import program

    if request["mode"] == "tests":
        program.serve_program(request["program"])
    else:
        program.run_script(request["program"])
