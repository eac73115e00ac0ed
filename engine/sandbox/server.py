"""Fork server for untrusted Python programs: a pre-warmed interpreter that forks one isolated
process tree per run.

Started by ``engine/sandbox/__init__.py`` as ``python -I -S server.py '<options json>'`` (stdlib only:
it must not import the package). Protocol:

* On start it isolates itself (see ``enter_server_namespaces``), pre-imports common modules, then
  writes one JSON line ``{"ready": true, ...}`` to stdout.
* Each run arrives on the control socket (SOCK_SEQPACKET) as a one-byte message carrying five
  file descriptors: a memfd holding the JSON request, then the write ends of the program's
  stdout and stderr pipes, of the harness report pipe and of the status pipe. The server hands
  them to a spare sandbox it prepared in advance, then prepares the next spare while that run
  goes on: namespace setup is off every run's latency. Everything else travels over the pipes,
  so callers in many threads can share one server without replies to route.
* EOF on the control socket (the caller process died) ends the server, and its spare.

Process tree of one run, with namespaces:

    server (uid 0 inside its own user namespace, which maps to nobody/the caller outside;
            root filesystem: a read-only tmpfs with read-only binds of the system and Python dirs)
      └─ setup      new user namespace (uid 1000 inside, still nobody outside), new network
                    (no interfaces up), mount, pid, ipc and uts namespaces; private tmpfs on /tmp
                    and /dev/shm. Waits for the supervisor.
          └─ supervisor   pid 1 of the new pid namespace: mounts /proc, waits for its request,
                          enforces the wall-clock limit, reports the exit status. When it exits
                          the kernel kills every process left in the namespace (fork bombs,
                          daemonized children).
              └─ program  rlimits, no capabilities, no_new_privs, empty environment, cwd /tmp;
                          runs the harness, which runs the untrusted code.

Without namespaces (kernel or container forbids them) the same tree runs with rlimits, a new
session, a private temporary directory and a Python audit hook; see docs/verifiers.md.
"""

from __future__ import annotations

import builtins
import ctypes
import errno
import fcntl
import gc
import io
import json
import os
import pwd
import resource
import select
import signal
import socket
import sys
import time
import traceback
import types

# Modules model-written programs import most (HumanEval: typing, math, random, copy, string,
# collections, re, hashlib). Loading them once here makes every run cheaper; heavier ones
# (unittest, dataclasses, statistics) would make every fork slower than the imports they save.
PREIMPORTED = (
    "bisect",
    "collections",
    "copy",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "math",
    "random",
    "re",
    "string",
    "typing",
)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MNT_DETACH = 0x2
# Flags a bind remount must repeat: the kernel refuses to clear them inside a user namespace.
PRESERVED_MOUNT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME

PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
PIVOT_ROOT_SYSCALL = {"x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

SANDBOX_UID = 1000  # uid of the program inside its user namespace; not root there either
SANDBOX_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    # Numerical libraries start one thread per core at import; the process limit would kill them.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
DEVICES = ("null", "zero", "full", "random", "urandom")
SYSTEM_DIRECTORIES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

# The harness keeps its own references: the program may replace builtins and os functions.
_exec = builtins.exec
_compile = builtins.compile
_os_write = os.write
_os_exit = os._exit
_json_dumps = json.dumps


class SetupError(Exception):
    """A step of the isolation setup failed; the message says which."""


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(number)} (errno {number})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {source or fstype or ''} on {target}",
    )


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def unshare_user_namespace(inside_uid: int, extra_flags: int = 0) -> None:
    """Enter a new user namespace where our own uid/gid (the only ids an unprivileged process
    may map) appear as inside_uid. The ids are read before unsharing: afterwards, until the map
    is written, they read as the overflow id."""
    outside_uid, outside_gid = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWUSER | extra_flags), "unshare user namespace")
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"{inside_uid} {outside_uid} 1\n")
    write_file("/proc/self/gid_map", f"{inside_uid} {outside_gid} 1\n")


# --------------------------------------------------------------------------------------------
# Server setup: a private, read-only root filesystem and an unprivileged user namespace.
# --------------------------------------------------------------------------------------------


def _bind_sources() -> list[str]:
    """Directories the sandboxed interpreter needs: system libraries and the Python install."""
    candidates = list(SYSTEM_DIRECTORIES)
    # The prefixes hold the standard library; sys.path adds the site-packages the caller passed.
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path}:
        if prefix and os.path.isdir(prefix):
            candidates += [prefix, os.path.realpath(prefix)]
    executable = os.path.realpath(sys.executable)
    candidates.append(os.path.dirname(executable))
    sources: list[str] = []
    for path in sorted(set(candidates), key=len):
        path = os.path.normpath(path)
        if path == "/" or not os.path.lexists(path):
            continue
        if any(path == done or path.startswith(done.rstrip("/") + "/") for done in sources):
            continue
        sources.append(path)
    return sources


def build_root(new_root: str) -> None:
    """Fill the tmpfs at new_root with read-only binds, device nodes and empty mount points."""
    for source in _bind_sources():
        target = new_root + source
        if os.path.islink(source) and source in SYSTEM_DIRECTORIES:
            # Merged-/usr systems: /bin -> usr/bin. Keep the link, the target is bound anyway.
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(source), target)
            continue
        os.makedirs(target, exist_ok=True)
        mount(source, target, None, MS_BIND | MS_REC)
    # Every mount under the new root (the binds and whatever sits below them) becomes read-only.
    with open("/proc/self/mountinfo") as mountinfo:
        mount_points = [line.split()[4] for line in mountinfo]
    for point in mount_points:
        point = point.replace("\\040", " ")
        if point.startswith(new_root + "/"):
            flags = os.statvfs(point).f_flag & PRESERVED_MOUNT_FLAGS
            try:
                mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
            except SetupError:
                if not os.statvfs(point).f_flag & MS_RDONLY:
                    raise
    os.makedirs(new_root + "/dev/shm")
    for device in DEVICES:
        target = f"{new_root}/dev/{device}"
        open(target, "w").close()
        mount(f"/dev/{device}", target, None, MS_BIND)
    for name, link in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(link, f"{new_root}/dev/{name}")
    # The server needs a /proc to write uid maps; each run mounts its own over it.
    os.makedirs(new_root + "/proc")
    mount("/proc", new_root + "/proc", None, MS_BIND | MS_REC)
    os.makedirs(new_root + "/tmp")
    os.chmod(new_root + "/tmp", 0o1777)


def pivot_root(new_root: str) -> None:
    machine = os.uname().machine
    number = PIVOT_ROOT_SYSCALL.get(machine)
    if number is None:
        raise SetupError(f"pivot_root: unknown syscall number for {machine}")
    old_root = new_root + "/.old-root"
    os.makedirs(old_root)
    _check(libc.syscall(number, new_root.encode(), old_root.encode()), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old-root", MNT_DETACH), "unmount old root")
    os.rmdir("/.old-root")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_server_namespaces() -> str:
    """Give the server a private read-only root and drop it into an unprivileged user namespace.

    As root: build the root first (root may read directories such as /root/.pyenv that nobody
    may), then become nobody and create a user namespace mapping uid 0 inside to nobody outside.
    As another user: create the user namespace first (mapping the user's own uid) and build the
    root inside it. Either way every run's processes are, outside, an unprivileged uid that owns
    no files the run could reach.
    """
    nobody = _nobody_ids()
    if os.geteuid() == 0:
        _check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
        _make_root()
        os.setgroups([])
        os.setresgid(nobody[1], nobody[1], nobody[1])
        os.setresuid(nobody[0], nobody[0], nobody[0])
        # Changing uid made us non-dumpable, which makes /proc/self/uid_map root-owned.
        _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl dumpable")
        unshare_user_namespace(0)
        return f"server runs as uid {nobody[0]} (nobody) in a user namespace"
    outside_uid = os.getuid()
    unshare_user_namespace(0, CLONE_NEWNS)
    _make_root()
    return f"server runs as uid {outside_uid} (the worker's) in a user namespace"


def _make_root() -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Any existing directory can host the new root's tmpfs; /tmp exists everywhere.
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m,nr_inodes=4096")
    build_root("/tmp")
    pivot_root("/tmp")


def _nobody_ids() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


# --------------------------------------------------------------------------------------------
# One run: setup process -> supervisor -> program.
# --------------------------------------------------------------------------------------------


def write_status(fd: int, **event: object) -> None:
    try:
        _os_write(fd, (_json_dumps(event) + "\n").encode())
    except OSError:
        pass


def close_fds_except(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep) + [1 << 20]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


DEFAULT_TMP_BYTES = 64 << 20


def prepare_spare(channel: socket.socket, namespaced: bool) -> None:
    """Setup process of a spare sandbox (forked by the server ahead of any request).

    Creates the run's namespaces and private mounts, forks the supervisor, and waits for it.
    Preparing before the request arrives takes the namespace setup off every run's latency.
    A setup failure is not lost: the supervisor-to-be still takes the next request and
    reports the failure on its status pipe. Never returns.
    """
    failure = ""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        close_fds_except({channel.fileno(), 2})
        os.setsid()
        if namespaced:
            unshare_user_namespace(SANDBOX_UID)
            _check(
                libc.unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS),
                "unshare namespaces",
            )
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={DEFAULT_TMP_BYTES},nr_inodes=4096")
            mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m,nr_inodes=256")
        supervisor_pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        failure = f"sandbox setup failed: {error}"
        supervisor_pid = 0
    if supervisor_pid == 0:
        await_request(channel, namespaced, failure)
    channel.close()
    try:
        os.waitpid(supervisor_pid, 0)
    finally:
        _os_exit(0)


def await_request(channel: socket.socket, namespaced: bool, failure: str) -> None:
    """Supervisor-to-be: finish what can be done early, then wait for one request. Never returns."""
    status_fd = -1
    try:
        # As pid 1 of the namespace we receive, from inside it, only signals we handle: drop
        # the one handler Python installs (SIGINT), or a program could break the supervisor
        # and turn its own fail into an error.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        global_pid = os.getpid()
        if namespaced and not failure:
            # Our pid as the caller sees it, read before the namespace's own /proc hides it.
            with open("/proc/self/status") as status_file:
                for line in status_file:
                    if line.startswith("NSpid:"):
                        global_pid = int(line.split()[1])
            try:
                mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except SetupError:
                # Some container runtimes mask parts of /proc, which forbids a new proc mount;
                # hide the server's /proc (host processes) behind an empty tmpfs instead.
                mount("tmpfs", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k")
        # Non-dumpable: a program running as the same uid cannot ptrace us or open /proc/1/fd.
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except BaseException as error:  # noqa: BLE001
        failure = failure or f"sandbox setup failed: {error}"
    try:
        message, fds, _flags, _address = socket.recv_fds(channel, 16, 8)
    except OSError:
        _os_exit(0)
    channel.close()
    if not message or len(fds) != 5:
        _os_exit(0)  # the server went away
    status_fd = fds[4]
    try:
        if failure:
            raise SetupError(failure)
        with os.fdopen(fds[0], "rb") as request_file:
            request_file.seek(0)
            request = json.loads(request_file.read())
        write_status(status_fd, event="started", supervisor_pid=global_pid, namespaced=namespaced)
        tmp_bytes = int(request["limits"]["tmp_bytes"])
        if namespaced and tmp_bytes != DEFAULT_TMP_BYTES:
            mount(None, "/tmp", None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={tmp_bytes}")
    except BaseException as error:  # noqa: BLE001
        message = str(error) if isinstance(error, SetupError) else f"sandbox setup failed: {error}"
        write_status(status_fd, event="error", message=message)
        _os_exit(1)
    supervise(request, fds[1:], namespaced)


def supervise(request: dict, fds: list[int], namespaced: bool) -> None:
    """Supervisor: pid 1 of the run's pid namespace. Runs the program under the wall-clock limit.
    Never returns."""
    stdout_fd, stderr_fd, report_fd, status_fd = fds
    limits = request["limits"]
    workdir = "/tmp"
    try:
        if not namespaced:
            workdir = tempfile.mkdtemp(prefix="passband-sandbox-")
        program_pid = os.fork()
        if program_pid == 0:
            run_program(request, stdout_fd, stderr_fd, report_fd, status_fd, workdir, namespaced)
        try:
            os.setpgid(program_pid, program_pid)
        except OSError:
            pass  # the program already did it, or is gone
        for fd in (stdout_fd, stderr_fd, report_fd):
            os.close(fd)
        write_status(status_fd, event="program_started", program_pid=program_pid)
        started = time.monotonic()
        wait_status, timed_out = _wait_with_deadline(program_pid, float(limits["wall_seconds"]))
        wall_seconds = time.monotonic() - started
        _kill_group(program_pid)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        result: dict[str, object] = {
            "event": "exit",
            "timed_out": timed_out,
            "wall_seconds": round(wall_seconds, 4),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 4),
            "max_rss_kb": usage.ru_maxrss,
        }
        if os.WIFSIGNALED(wait_status):
            result["signal"] = os.WTERMSIG(wait_status)
        else:
            result["exit_code"] = os.waitstatus_to_exitcode(wait_status)
        write_status(status_fd, **result)
        if not namespaced:
            shutil.rmtree(workdir, ignore_errors=True)
        _os_exit(0)
    except BaseException as error:  # noqa: BLE001
        write_status(status_fd, event="error", message=f"sandbox supervisor failed: {error}")
        _os_exit(1)


def _wait_with_deadline(pid: int, seconds: float) -> tuple[int, bool]:
    """waitpid with a deadline; on expiry kill the program's process group. Returns (status, timed_out)."""
    deadline = time.monotonic() + seconds
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    while True:
        finished, wait_status = os.waitpid(pid, os.WNOHANG)
        if finished:
            return wait_status, False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill_group(pid)
            _, wait_status = os.waitpid(pid, 0)
            return wait_status, True
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


def drop_capabilities() -> None:
    """Leave the program no capabilities, now or after an execve.

    capset clears the effective, permitted and inheritable sets (ambient follows permitted);
    no_new_privs stops setuid binaries and file capabilities from granting any back, and the
    program's uid inside its namespace is not 0, so an execve cannot regain root's set either.
    """
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(header, data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl no_new_privs")


def run_program(
    request: dict,
    stdout_fd: int,
    stderr_fd: int,
    report_fd: int,
    status_fd: int,
    workdir: str,
    namespaced: bool,
) -> None:
    """The program process: apply limits, then run the harness. Never returns."""
    status_target = status_fd  # where a setup failure is reported; fd 4 once descriptors moved
    try:
        os.setpgid(0, 0)
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, request.get("stdin", "").encode())
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        # Move every source above the targets first so no dup2 overwrites a source still needed.
        sources = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (stdin_fd, stdout_fd, stderr_fd, report_fd, status_fd)]
        for target, source in enumerate(sources):
            os.dup2(source, target)
        status_target = 4
        close_fds_except({0, 1, 2, 3, 4})
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(SANDBOX_ENVIRONMENT)
        if not namespaced:
            os.environ["HOME"] = os.environ["TMPDIR"] = workdir
        for name in ("SIGINT", "SIGTERM", "SIGCHLD", "SIGALRM", "SIGXCPU"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        apply_limits(request["limits"], namespaced)
        if namespaced:
            drop_capabilities()
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
    except BaseException as error:  # noqa: BLE001
        # Reported on the status pipe: the report pipe is writable by the program, so nothing
        # read from it may turn a run into an "error" (that would let a program dodge a fail).
        write_status(status_target, event="error", message=f"sandbox program setup failed: {error}")
        _os_exit(1)
    os.close(4)
    if not namespaced:
        install_audit_guard(workdir)
    if request["mode"] == "tests":
        run_tests(request["program"], request["tests"], request["nonce"])
    else:
        run_script(request["program"])


def apply_limits(limits: dict, namespaced: bool) -> None:
    cpu = max(1, int(-(-float(limits["cpu_seconds"]) // 1)))
    memory = int(limits["memory_bytes"])
    file_bytes = int(limits["max_file_bytes"])
    open_files = int(limits["max_open_files"])
    settings = [
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if namespaced:
        # Counted per (user namespace, uid), so per run. The setup process and the supervisor
        # are in the count too, hence + 2.
        processes = int(limits["max_processes"]) + 2
        settings.append((resource.RLIMIT_NPROC, processes, processes))
    for which, soft, hard in settings:
        resource.setrlimit(which, (soft, hard))


def install_audit_guard(workdir: str) -> None:
    """Fallback isolation only: refuse the obvious escapes at the Python level.

    Not a security boundary (ctypes or a C extension bypasses it); it keeps honest-but-sloppy
    and naive hostile programs from reaching the network, spawning processes, signalling other
    processes or writing outside their directory when the kernel gives us no namespaces.
    """
    root = os.path.realpath(workdir)
    refused = {
        "os.fork",
        "os.forkpty",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.kill",
        "os.killpg",
        "subprocess.Popen",
        "pty.spawn",
        "socket.__new__",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.call_function",
    }
    # Events whose arguments at these positions are paths that get modified.
    modifying = {
        "os.remove": (0,),
        "os.rmdir": (0,),
        "os.mkdir": (0,),
        "os.chmod": (0,),
        "os.chown": (0,),
        "os.truncate": (0,),
        "os.utime": (0,),
        "os.rename": (0, 1),
        "os.link": (0, 1),
        "os.symlink": (1,),
        "shutil.rmtree": (0,),
    }
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

    def require_inside(path: object) -> None:
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise PermissionError("sandbox: modifying files by descriptor is not allowed")
        resolved = os.path.realpath(os.fsdecode(path))
        if resolved != root and not resolved.startswith(root + os.sep):
            raise PermissionError(f"sandbox: writing outside the work directory is not allowed: {resolved}")

    own_proc = f"/proc/{os.getpid()}/"

    def guard(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags
            )
            if writing and not isinstance(path, int):
                require_inside(path)
            elif isinstance(path, (str, bytes, os.PathLike)):
                # Other processes' /proc entries hold the worker's launch environment and memory.
                resolved = os.path.realpath(os.fsdecode(path))
                if resolved.startswith("/proc/") and not (resolved + "/").startswith(own_proc):
                    raise PermissionError(f"sandbox: reading {resolved} is not allowed")
        elif event in modifying:
            for position in modifying[event]:
                if position < len(args):
                    require_inside(args[position])
        elif event in refused:
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(guard)


# --------------------------------------------------------------------------------------------
# Harness: runs inside the program process.
# --------------------------------------------------------------------------------------------


def _report(fd: int, **event: object) -> None:
    try:
        _os_write(fd, (_json_dumps(event) + "\n").encode())
    except BaseException:  # noqa: BLE001 - the program may have broken anything
        pass


def _describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # noqa: BLE001
        text = ""
    name = type(error).__name__
    return f"{name}: {text[:300]}" if text else name


def _failing_line(error: BaseException, filename: str, source: str) -> tuple[int | None, str]:
    """The line of ``source`` (compiled as ``filename``) where ``error`` surfaced, if any."""
    line_number = None
    try:
        trace = error.__traceback__
        while trace is not None:
            if trace.tb_frame.f_code.co_filename == filename:
                line_number = trace.tb_lineno
            trace = trace.tb_next
    except BaseException:  # noqa: BLE001 - the program may have broken anything
        return None, ""
    if line_number is None:
        return None, ""
    lines = source.splitlines()
    text = lines[line_number - 1].strip() if 0 < line_number <= len(lines) else ""
    return line_number, text[:200]


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def run_tests(program: str, tests: list[str], nonce: str) -> None:
    """Run the program as module ``solution``, then each test snippet in its namespace.

    The nonce is written only after the last test returned, so a program that exits early
    (sys.exit, os._exit, a signal) cannot pass.
    """
    # The caller compiled the tests already (a test that does not compile is the task's fault).
    compiled_tests = [_compile(test, f"<test {index}>", "exec") for index, test in enumerate(tests)]
    try:
        code = _compile(program, "solution.py", "exec")
    except BaseException as error:  # noqa: BLE001
        line = getattr(error, "lineno", None)
        _report(3, event="syntax_error", line=line, error=_describe(error))
        _os_exit(1)
    module = types.ModuleType("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module
    try:
        _exec(code, module.__dict__)
    except BaseException as error:  # noqa: BLE001
        line, text = _failing_line(error, "solution.py", program)
        _report(3, event="program_error", error=_describe(error), line=line, source=text)
        _flush_standard_streams()
        _os_exit(1)
    for index, compiled in enumerate(compiled_tests):
        try:
            _exec(compiled, module.__dict__)
        except BaseException as error:  # noqa: BLE001
            line, text = _failing_line(error, f"<test {index}>", tests[index])
            _report(3, event="test_failed", index=index, error=_describe(error), line=line, source=text)
            _flush_standard_streams()
            _os_exit(1)
    _flush_standard_streams()
    _report(3, event="passed", nonce=nonce)
    _os_exit(0)


def run_script(program: str) -> None:
    """Run the program as ``__main__`` (stdin/stdout programs); the exit code is the result."""
    try:
        code = _compile(program, "solution.py", "exec")
    except BaseException as error:  # noqa: BLE001
        _report(3, event="syntax_error", line=getattr(error, "lineno", None), error=_describe(error))
        _os_exit(1)
    module = types.ModuleType("__main__")
    module.__file__ = "solution.py"
    sys.modules["__main__"] = module
    exit_code = 0
    try:
        _exec(code, module.__dict__)
    except SystemExit as error:
        if error.code is None or error.code == 0:
            exit_code = 0
        elif isinstance(error.code, int):
            exit_code = error.code & 0xFF or 1
        else:
            print(error.code, file=sys.stderr)
            exit_code = 1
    except BaseException as error:  # noqa: BLE001
        line, text = _failing_line(error, "solution.py", program)
        _report(3, event="program_error", error=_describe(error), line=line, source=text)
        try:
            # Start the traceback at the program's frame: the harness frame is noise.
            traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        except BaseException:  # noqa: BLE001
            pass
        exit_code = 1
    _flush_standard_streams()
    _os_exit(exit_code)


# --------------------------------------------------------------------------------------------
# Server loop.
# --------------------------------------------------------------------------------------------


def start_spare(control: socket.socket, namespaced: bool) -> socket.socket | None:
    """Fork a spare sandbox; returns the socket that hands it a request (None if fork failed)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return None
    if pid == 0:
        control.close()
        ours.close()
        prepare_spare(theirs, namespaced)
    theirs.close()
    return ours


def serve(control: socket.socket, namespaced: bool) -> None:
    """Hand each request to the spare sandbox prepared during the previous one, then prepare
    the next spare while that request runs."""
    spare = start_spare(control, namespaced)
    while True:
        try:
            message, fds, _flags, _address = socket.recv_fds(control, 16, 8)
        except OSError as error:
            if error.errno == errno.EINTR:
                continue
            return
        if not message:
            for fd in fds:
                os.close(fd)
            return  # the caller closed its end: it exited
        if len(fds) != 5:
            for fd in fds:
                os.close(fd)
            continue
        for _attempt in range(2):
            if spare is None:
                spare = start_spare(control, namespaced)
            if spare is None:
                write_status(fds[4], event="error", message="sandbox server could not fork")
                break
            try:
                socket.send_fds(spare, [b"r"], fds)
                break
            except OSError:
                spare.close()  # that spare died; prepare another and try once more
                spare = None
        else:
            write_status(fds[4], event="error", message="sandbox spare processes keep dying")
        if spare is not None:
            spare.close()
        for fd in fds:
            os.close(fd)
        spare = start_spare(control, namespaced)


def warm_up() -> None:
    """Do once here what every run does first, so that forked runs inherit it done.

    The first compile() in a process initialises the parser and AST types (over a millisecond,
    more than the rest of a typical run); json and text streams have first-use costs too.
    """
    namespace: dict[str, object] = {}
    _exec(_compile("def warm(x):\n    return [x, {'k': x}]\nassert warm(1)[0] == 1\n", "<warm-up>", "exec"), namespace)
    json.loads(_json_dumps({"event": "warm", "values": [1, 2.5, None, True, "x"]}))
    io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace").write("warm")


def main() -> None:
    options = json.loads(sys.argv[1])
    # Started with -S (no site: it imports a lot, and every import makes each fork dearer);
    # the caller passes its site-packages directories instead.
    sys.path.extend(path for path in options.get("site_packages", []) if path not in sys.path)
    control = socket.socket(fileno=int(options["control_fd"]))
    report: dict[str, object] = {"ready": True, "pid": os.getpid()}
    namespaced = bool(options["namespaces"])
    if not namespaced:
        # Only the fallback makes temporary directories; namespaced runs get a tmpfs instead.
        global shutil, tempfile
        import shutil
        import tempfile
    try:
        if namespaced:
            report["user"] = enter_server_namespaces()
        for name in PREIMPORTED:
            try:
                __import__(name)
            except ImportError:
                pass
        warm_up()
    except BaseException as error:  # noqa: BLE001
        print(json.dumps({"ready": False, "error": str(error)}), flush=True)
        _os_exit(1)
    # Children are reaped by the kernel; the server never waits for anything.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # Keep the collector away from the server's objects in every forked child: touching them
    # would copy their pages, and page copies are most of what a fork costs.
    gc.collect()
    gc.freeze()
    print(json.dumps(report), flush=True)
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    serve(control, namespaced)


if __name__ == "__main__":
    main()
