"""The fallback's audit hook: refuse the obvious escapes at the Python level when the kernel gives
no namespaces. Standard library only (loaded with the rest of runtime/ by server.py)."""

from __future__ import annotations

import ctypes
import os
import sys

from .isolation import libc

# What the fallback's audit guard refuses outright.
AUDIT_REFUSED = frozenset(
    {
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
)
# Audit events whose arguments at these positions are paths that get modified (inside the work directory only).
AUDIT_MODIFYING = {
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


def install_audit_guard(workdir: str, *, may_kill: int | None = None, may_disarm: bool = False) -> None:
    """Fallback isolation only: refuse the obvious escapes at the Python level.

    Not a security boundary (ctypes or a C extension bypasses it); it keeps honest-but-sloppy
    and naive hostile programs from reaching the network, spawning processes, signalling other
    processes or writing outside their directory when the kernel gives us no namespaces.
    ``may_kill``: the one process (group) this process may still signal (the judge's program);
    ``may_disarm``: whether it may still call ``disarm`` (the judge, ending its own kill timer).
    """
    timer_delete = ctypes.cast(libc.timer_delete, ctypes.c_void_p).value if may_disarm else None
    root = os.path.realpath(workdir)
    # Copies held by the hook alone: the program can reach this module's globals, not the closure's values.
    refused, modifying = frozenset(AUDIT_REFUSED), dict(AUDIT_MODIFYING)
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
        elif event in ("os.kill", "os.killpg") and may_kill is not None and args and args[0] == may_kill:
            return
        elif event == "ctypes.call_function" and timer_delete is not None and args and args[0] == timer_delete:
            return
        elif event in refused:
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(guard)
