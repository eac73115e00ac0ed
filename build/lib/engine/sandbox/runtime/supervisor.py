"""One run of the sandbox: setup process -> supervisor -> program (and, for tests, the judge).

Standard library only; loaded by server.py before the server isolates itself.

Descriptors a run receives (in this order): the program's request (a memfd: program, stdin,
limits, mode), the judge's request (a memfd: prelude, tests, entry point, nonce; empty for
scripts), the write ends of stdout, stderr, the report pipe and the status pipe.

In ``tests`` mode the supervisor forks the **program** first, while it has read only the
program's request (so the tests, the expected values and the nonce never exist in the
program's memory), and then the **judge**, which reads its own request, runs the tests and
calls the program's functions over two pipes. Only the judge holds the report pipe, and it is
non-dumpable: the program cannot ptrace it or read its memory or descriptors.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time

from . import isolation
from .isolation import SetupError

DEFAULT_TMP_BYTES = 64 << 20
REQUEST_FDS = 6
_os_exit = os._exit
_os_write = os.write
_json_dumps = json.dumps


def write_status(fd: int, **event: object) -> None:
    try:
        _os_write(fd, (_json_dumps(event) + "\n").encode())
    except OSError:
        pass


def prepare_spare(channel: socket.socket, namespaced: bool, maxima: dict) -> None:
    """Setup process of a spare sandbox (forked by the server ahead of any request).

    Creates the run's namespaces and private mounts, forks the supervisor, and waits for it.
    A setup failure is not lost: the supervisor-to-be still takes the next request and
    reports the failure on its status pipe. Never returns.
    """
    failure = ""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        isolation.close_fds_except({channel.fileno(), 2})
        os.setsid()
        if namespaced:
            isolation.unshare_user_namespace(isolation.SANDBOX_UID)
            flags = isolation.CLONE_NEWNET | isolation.CLONE_NEWNS | isolation.CLONE_NEWPID
            isolation._check(
                isolation.libc.unshare(flags | isolation.CLONE_NEWIPC | isolation.CLONE_NEWUTS), "unshare namespaces"
            )
            tmpfs = isolation.MS_NOSUID | isolation.MS_NODEV
            isolation.mount("tmpfs", "/tmp", "tmpfs", tmpfs, f"mode=0755,size={DEFAULT_TMP_BYTES},nr_inodes=4096")
            isolation.mount("tmpfs", "/dev/shm", "tmpfs", tmpfs, "mode=0755,size=16m,nr_inodes=256")
        supervisor_pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        failure = f"sandbox setup failed: {error}"
        supervisor_pid = 0
    if supervisor_pid == 0:
        await_request(channel, namespaced, failure, maxima)
    channel.close()
    try:
        os.waitpid(supervisor_pid, 0)
    finally:
        _os_exit(0)


def await_request(channel: socket.socket, namespaced: bool, failure: str, maxima: dict) -> None:
    """Supervisor-to-be: finish what can be done early, then wait for one request. Never returns."""
    try:
        # As pid 1 of the namespace we receive, from inside it, only signals we handle: drop
        # the one handler Python installs (SIGINT), or a program could break the supervisor.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        global_pid = os.getpid()
        if namespaced and not failure:
            # Our pid as the caller sees it, read before the namespace's own /proc hides it.
            with open("/proc/self/status") as status_file:
                for line in status_file:
                    if line.startswith("NSpid:"):
                        global_pid = int(line.split()[1])
            proc_flags = isolation.MS_NOSUID | isolation.MS_NODEV | isolation.MS_NOEXEC
            try:
                isolation.mount("proc", "/proc", "proc", proc_flags)
            except SetupError:
                # Some container runtimes mask parts of /proc, which forbids a new proc mount;
                # hide the server's /proc (host processes) behind an empty tmpfs instead.
                isolation.mount("tmpfs", "/proc", "tmpfs", proc_flags, "size=4k")
        # Non-dumpable: a program running as the same uid cannot ptrace us or open /proc/1/fd.
        isolation.libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
    except BaseException as error:  # noqa: BLE001
        failure = failure or f"sandbox setup failed: {error}"
    children: dict[str, tuple[int, socket.socket]] = {}
    if not failure:
        try:
            # The program and the judge are forked now, before any request exists, and wait for
            # their descriptors: two forks off every run's latency, and nothing of a request in
            # their memory but what each is handed.
            children = {role: _prefork(channel, role, namespaced) for role in ("program", "judge")}
        except BaseException as error:  # noqa: BLE001
            failure = f"sandbox setup failed: {error}"
    try:
        message, fds, _flags, _address = socket.recv_fds(channel, 16, 8)
    except OSError:
        _os_exit(0)
    channel.close()
    if not message or len(fds) != REQUEST_FDS:
        _os_exit(0)  # the server went away
    status_fd = fds[5]
    try:
        if failure:
            raise SetupError(failure)
        request = read_request(fds[0])
        request["limits"] = isolation.clamp_limits(request["limits"], maxima)
        write_status(status_fd, event="started", supervisor_pid=global_pid, namespaced=namespaced)
        tmp_bytes = int(request["limits"]["tmp_bytes"])
        if namespaced and tmp_bytes != DEFAULT_TMP_BYTES:
            flags = isolation.MS_REMOUNT | isolation.MS_NOSUID | isolation.MS_NODEV
            isolation.mount(None, "/tmp", None, flags, f"size={tmp_bytes}")
    except BaseException as error:  # noqa: BLE001
        message = str(error) if isinstance(error, SetupError) else f"sandbox setup failed: {error}"
        write_status(status_fd, event="error", message=message)
        _os_exit(1)
    supervise(request, fds, namespaced, children)


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


def _prefork(channel: socket.socket, role: str, namespaced: bool) -> tuple[int, socket.socket]:
    """Fork a child that waits for its descriptors; returns its pid and the socket that hands them."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            channel.close()
            message, fds, _flags, _address = socket.recv_fds(theirs, 1 << 16, 16)
        except BaseException:  # noqa: BLE001 - no request will come
            _os_exit(0)
        if not message or not fds:
            _os_exit(0)  # the run needs no judge, or the supervisor went away
        theirs.close()
        setup = json.loads(message)
        _become(setup, fds, setup["workdir"], namespaced, role=role)
    theirs.close()
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it, or is gone
    return pid, ours


def supervise(request: dict, fds: list[int], namespaced: bool, children: dict) -> None:
    """Supervisor: pid 1 of the run's pid namespace. Hands the program (and the judge) their
    descriptors, enforces the wall-clock limit and reports how each ended. Never returns."""
    program_request_fd, judge_request_fd, stdout_fd, stderr_fd, report_fd, status_fd = fds
    limits = request["limits"]
    testing = request["mode"] == "tests"
    workdir = "/tmp"
    try:
        if not namespaced:
            workdir = tempfile.mkdtemp(prefix="passband-sandbox-")
        setup = _json_dumps({"limits": limits, "mode": request["mode"], "workdir": workdir}).encode()
        program_pid, program_socket = children["program"]
        judge_pid, judge_socket = children["judge"]
        if testing:
            calls_read, calls_write = os.pipe()
            replies_read, replies_write = os.pipe()
            program_fds = [stdout_fd, stderr_fd, calls_read, replies_write, program_request_fd, status_fd]
            judge_fds = [stdout_fd, stderr_fd, report_fd, replies_read, calls_write, judge_request_fd, status_fd]
            socket.send_fds(program_socket, [setup], program_fds)
            socket.send_fds(judge_socket, [setup], judge_fds)
            for fd in (calls_read, calls_write, replies_read, replies_write):
                os.close(fd)
        else:
            socket.send_fds(program_socket, [setup], [stdout_fd, stderr_fd, report_fd, program_request_fd, status_fd])
            judge_pid = 0
        program_socket.close()
        judge_socket.close()  # a judge that got nothing exits
        for fd in (program_request_fd, judge_request_fd, stdout_fd, stderr_fd, report_fd):
            os.close(fd)
        write_status(status_fd, event="program_started", program_pid=program_pid, judge_pid=judge_pid)
        started = time.monotonic()
        main_pid = judge_pid or program_pid
        wait_status, usage, timed_out = _wait_with_deadline(main_pid, float(limits["wall_seconds"]), program_pid)
        result: dict[str, object] = {"event": "exit", "timed_out": timed_out}
        result.update(_ending(wait_status, usage))
        if testing:
            # A judge that passed needs nothing more from the program: end it now.
            passed = os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == 0
            ending = _end_program(program_pid, 0.0 if passed else PROGRAM_EXIT_GRACE_SECONDS)
            result.update({f"program_{key}": value for key, value in ending.items()})
        result["wall_seconds"] = round(time.monotonic() - started, 4)
        write_status(status_fd, **result)
        if not namespaced:
            shutil.rmtree(workdir, ignore_errors=True)
        _os_exit(0)
    except BaseException as error:  # noqa: BLE001
        write_status(status_fd, event="error", message=f"sandbox supervisor failed: {error}")
        _os_exit(1)


def _ending(wait_status: int, usage) -> dict[str, object]:
    ending: dict[str, object] = {"cpu_seconds": round(usage.ru_utime + usage.ru_stime, 4)}
    if os.WIFSIGNALED(wait_status):
        ending["signal"] = os.WTERMSIG(wait_status)
    else:
        ending["exit_code"] = os.waitstatus_to_exitcode(wait_status)
    return ending


PROGRAM_EXIT_GRACE_SECONDS = 1.0


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


def _wait_with_deadline(pid: int, seconds: float, also_kill: int) -> tuple[int, object, bool]:
    """wait4 with a deadline; on expiry kill the process groups. Returns (status, rusage, timed_out)."""
    deadline = time.monotonic() + seconds
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    while True:
        finished, wait_status, usage = os.wait4(pid, os.WNOHANG)
        if finished:
            return wait_status, usage, False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill_group(pid)
            _kill_group(also_kill)
            _, wait_status, usage = os.wait4(pid, 0)
            return wait_status, usage, True
        if pidfd is not None:
            select.select([pidfd], [], [], remaining)
        else:
            time.sleep(min(remaining, 0.005))


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def _become(setup: dict, fds: list[int], workdir: str, namespaced: bool, *, role: str) -> None:
    """A child of the supervisor, handed its descriptors: limits, then the harness. Never returns.

    Program: 0 stdin, 1 stdout, 2 stderr, then (tests) 3 calls in, 4 replies out or (script)
    3 report; it is handed its request too, read and closed here. Judge: 0 empty stdin,
    1 stdout, 2 stderr, 3 report, 4 replies in, 5 calls out, 6 its request. The status pipe
    comes last and is closed before any untrusted code runs.
    """
    status_target = fds[-1]  # where a setup failure is reported; moves with the others
    request = {"mode": setup["mode"], "limits": setup["limits"]}
    try:
        os.setpgid(0, 0)
        if role == "judge":
            # Before anything secret is read: non-dumpable, so the program (same uid) cannot
            # ptrace this process or open its memory and descriptors through /proc.
            isolation.libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
        else:
            request_fd = fds.pop(-2)
            request = {**read_request(request_fd), **request}  # limits as the supervisor clamped them
            os.close(request_fd)
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, request.get("stdin", "").encode() if role == "program" else b"")
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        # Move every source above the targets first so no dup2 overwrites a source still needed.
        sources = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in [stdin_fd, *fds]]
        for target, source in enumerate(sources):
            os.dup2(source, target)
        status_target = len(sources) - 1
        isolation.close_fds_except(set(range(len(sources))))
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(isolation.SANDBOX_ENVIRONMENT)
        if not namespaced:
            os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        for name in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGALRM", "SIGXCPU", "SIGPIPE"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe is an OSError, not a death
        isolation.apply_limits(request["limits"], namespaced, testing=request["mode"] == "tests")
        if namespaced:
            isolation.drop_capabilities()
        import random

        random.seed()  # forked from one server: without this every run shares one random stream
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.argv = ["solution.py"]
        sys.dont_write_bytecode = True
        sys.path = [path for path in sys.path if path]  # no cwd on the path: /tmp is writable
        judge_request = read_request(6) if role == "judge" else None
    except BaseException as error:  # noqa: BLE001
        # Reported on the status pipe: nothing the program writes may turn a run into an error.
        write_status(status_target, event="error", message=f"sandbox {role} setup failed: {error}")
        _os_exit(1)
    os.close(status_target)
    if not namespaced:
        isolation.install_audit_guard(workdir)
    from . import judge, program

    if role == "judge":
        judge.run_judge(judge_request)
    elif request["mode"] == "tests":
        program.serve_program(request["program"])
    else:
        program.run_script(request["program"])
