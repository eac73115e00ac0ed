"""Isolation primitives of the sandbox: namespaces, the private read-only root, rlimits and
capabilities (the fallback's audit hook is in ``audit``). Standard library only (loaded by server.py before
the server isolates itself; see engine/sandbox/server.py for the process tree)."""

from __future__ import annotations

import ctypes
import io
import os
import pwd
import resource
import signal
import sys

from . import views

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
PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1
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
    for prefix in set(views.python_prefixes()):
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


def _through_old_tmp(old_tmp: int, path: str) -> str:
    """`path`, under /tmp, reached through `old_tmp`: a descriptor of /tmp taken before a tmpfs covered it."""
    return f"/proc/self/fd/{old_tmp}/{path.removeprefix('/tmp/')}"


def mount_private_tmp(size_bytes: int) -> None:
    """Mount the run's own tmpfs on /tmp, keeping visible (read-only) the Python directories the server bound
    under /tmp: a checkout whose virtualenv lives in /tmp (a CI clone) would otherwise lose its site-packages."""
    kept = [path for path in _bind_sources() if path.startswith("/tmp/")]
    old_tmp = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY) if kept else -1
    try:
        flags = MS_NOSUID | MS_NODEV
        mount("tmpfs", "/tmp", "tmpfs", flags, f"mode=0755,size={size_bytes},nr_inodes=4096")
        for path in kept:
            os.makedirs(path, exist_ok=True)
            mount(_through_old_tmp(old_tmp, path), path, None, MS_BIND | MS_REC)
            preserved = os.statvfs(path).f_flag & PRESERVED_MOUNT_FLAGS
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | preserved)
    finally:
        if old_tmp >= 0:
            os.close(old_tmp)


def build_root(new_root: str, *, sources: list[str] | None = None, old_tmp: int = -1) -> None:
    """Fill the tmpfs at new_root with read-only binds, device nodes and empty mount points. Sources under
    /tmp are bound from `old_tmp`, a descriptor of /tmp taken before new_root's tmpfs covered it."""
    for source in _bind_sources() if sources is None else sources:
        target = new_root + source
        origin = _through_old_tmp(old_tmp, source) if old_tmp >= 0 and source.startswith("/tmp/") else source
        if os.path.islink(source) and source in SYSTEM_DIRECTORIES:
            # Merged-/usr systems: /bin -> usr/bin. Keep the link, the target is bound anyway.
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.symlink(os.readlink(source), target)
            continue
        os.makedirs(target, exist_ok=True)
        mount(origin, target, None, MS_BIND | MS_REC)
    views.apply(
        new_root,
        mount,
        lambda source: _through_old_tmp(old_tmp, source) if old_tmp >= 0 and source.startswith("/tmp/") else source,
    )
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
    os.makedirs(new_root + "/tmp", exist_ok=True)  # it exists when a source lives under /tmp
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
    # Found before the new root's tmpfs hides /tmp, and bound from the old /tmp through a descriptor: a
    # Python install under /tmp (a checkout's virtualenv in a CI clone) stays visible.
    sources = _bind_sources()
    old_tmp = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
    try:
        # Any existing directory can host the new root's tmpfs; /tmp exists everywhere.
        mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m,nr_inodes=4096")
        build_root("/tmp", sources=sources, old_tmp=old_tmp)
    finally:
        os.close(old_tmp)
    pivot_root("/tmp")


def _nobody_ids() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def name_process(name: str) -> None:
    """The process's name in ps and top (15 bytes at most); best effort."""
    buffer = ctypes.create_string_buffer(name.encode()[:15])
    libc.prctl(PR_SET_NAME, ctypes.addressof(buffer), 0, 0, 0)


class _SigEvent(ctypes.Structure):
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("pad", ctypes.c_int * 12),
    ]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_long), ("nanoseconds", ctypes.c_long)]


class _TimerSpec(ctypes.Structure):
    _fields_ = [("interval", _TimeSpec), ("value", _TimeSpec)]


CLOCK_MONOTONIC = 1
SIGEV_SIGNAL = 0


# Built once in the server: a judge only fills in the time and makes the calls.
_KILL_EVENT = _SigEvent(signo=signal.SIGKILL, notify=SIGEV_SIGNAL)
_KILL_TIME = _TimerSpec()
_TIMER = ctypes.c_void_p()


def kill_self_after(seconds: float) -> ctypes.c_void_p:
    """A kernel timer that sends this process SIGKILL in ``seconds``, whatever its code does
    (a call into C that holds the interpreter, signal handlers replaced or ignored). Returns
    the timer, for ``disarm``."""
    _check(libc.timer_create(CLOCK_MONOTONIC, ctypes.byref(_KILL_EVENT), ctypes.byref(_TIMER)), "timer_create")
    whole = int(seconds)
    _KILL_TIME.value.seconds, _KILL_TIME.value.nanoseconds = whole, int((seconds - whole) * 1e9)
    _check(libc.timer_settime(_TIMER, 0, ctypes.byref(_KILL_TIME), None), "timer_settime")
    return _TIMER


def disarm(timer: ctypes.c_void_p) -> None:
    _check(libc.timer_delete(timer), "timer_delete")


def close_fds_except(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep) + [1 << 20]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


# Built once in the server: every run's processes only make the calls.
_CAPABILITY_HEADER = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
_NO_CAPABILITIES = (ctypes.c_uint32 * 6)()


def drop_capabilities() -> None:
    """Leave the program no capabilities, now or after an execve.

    capset clears the effective, permitted and inheritable sets (ambient follows permitted);
    no_new_privs stops setuid binaries and file capabilities from granting any back, and the
    program's uid inside its namespace is not 0, so an execve cannot regain root's set either.
    """
    _check(libc.capset(_CAPABILITY_HEADER, _NO_CAPABILITIES), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl no_new_privs")


# The most any request may get, whatever a task or an API caller asked for. The caller (the
# Sandbox in engine/sandbox/__init__.py) passes its own maxima when it starts the server; these
# are the ceilings when it passes none.
DEFAULT_MAXIMA = {
    "wall_seconds": 60.0,
    "cpu_seconds": 60.0,
    "memory_bytes": 4 << 30,
    "max_processes": 16,
    "max_open_files": 256,
    "max_file_bytes": 64 << 20,
    "tmp_bytes": 256 << 20,
}


def clamp_limits(limits: dict, maxima: dict) -> dict:
    """Each limit of a request, lowered to the server's maximum; a missing one gets the maximum."""
    clamped = {}
    for name, default in DEFAULT_MAXIMA.items():
        ceiling = maxima.get(name, default)
        asked = limits.get(name, ceiling)
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or asked != asked or asked <= 0:
            asked = ceiling
        clamped[name] = type(default)(min(asked, ceiling))
    return clamped


def apply_limits(limits: dict, namespaced: bool, *, judge: bool) -> None:
    """rlimits of the program, or of the judge (the setup process, in tests mode)."""
    cpu = max(1, int(-(-float(limits["cpu_seconds"]) // 1)))
    if judge:
        # The judge's own CPU is bounded by the wall clock; this only catches a long call into C
        # that its alarm cannot interrupt.
        cpu = max(1, int(-(-float(limits["wall_seconds"]) // 1))) + 1
        cpu_limits = (cpu, cpu)
    elif namespaced:
        # The program is pid 1 of its namespace, which ignores SIGXCPU: the kill comes at the limit.
        cpu_limits = (cpu, cpu)
    else:
        cpu_limits = (cpu, cpu + 1)
    memory = int(limits["memory_bytes"])
    file_bytes = int(limits["max_file_bytes"])
    open_files = int(limits["max_open_files"])
    settings = [
        (resource.RLIMIT_CPU, *cpu_limits),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if namespaced:
        # Counted per (user namespace, uid), so per run; the setup process is in the count too.
        processes = int(limits["max_processes"]) + 1
        settings.append((resource.RLIMIT_NPROC, processes, processes))
    for which, soft, hard in settings:
        resource.setrlimit(which, (soft, hard))


def prepare_interpreter() -> None:
    """Once, in the server before it forks anything: what the program and the judge of every
    run would otherwise each do before their code runs. A forked process pays for every page it
    writes, so settings made here once are cheaper than the same settings made in each run.

    The server was started with an empty environment; its standard streams are reopened by
    every run on the run's own descriptors 0-2.
    """
    os.environ.clear()
    os.environ.update(SANDBOX_ENVIRONMENT)
    # Python's own SIGINT handler would let a process of the run interrupt another with
    # KeyboardInterrupt; SIGPIPE stays ignored (a closed pipe is an OSError, not a death).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for stream, errors in ((sys.stdin, "replace"), (sys.stdout, "backslashreplace"), (sys.stderr, "backslashreplace")):
        assert isinstance(stream, io.TextIOWrapper)  # the interpreter's own streams
        stream.reconfigure(encoding="utf-8", errors=errors, line_buffering=stream is sys.stderr or None)
    sys.argv = ["solution.py"]
    sys.dont_write_bytecode = True
    sys.path = [path for path in sys.path if path]  # no cwd on the path: /tmp is writable
