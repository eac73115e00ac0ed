"""Fork server for untrusted Python programs: a pre-warmed interpreter that forks one isolated
process tree per run.

Started by ``engine/sandbox/__init__.py`` as ``python -I -S server.py '<options json>'`` (stdlib only:
it must not import the package). Protocol:

* On start it isolates itself (see ``enter_server_namespaces``), pre-imports common modules, then
  writes one JSON line ``{"ready": true, ...}`` to stdout.
* Each run arrives on the control socket (SOCK_SEQPACKET) as a one-byte message carrying six
  file descriptors: a memfd holding the program's request, a memfd holding the judge's request
  (the tests), then the write ends of the stdout and stderr pipes, of the report pipe and of
  the status pipe. The server hands
  them to a spare sandbox it prepared in advance, then prepares the next spare while that run
  goes on: namespace setup is off every run's latency. Everything else travels over the pipes,
  so callers in many threads can share one server without replies to route.
* EOF on the control socket (the caller process died) ends the server, and its spare.

Process tree of one run, with namespaces (two processes per run, each forked ahead of the
request, and each named in ``ps``: pb-setup, pb-program):

    server (uid 0 inside its own user namespace, which maps to nobody/the caller outside;
            root filesystem: a read-only tmpfs with read-only binds of the system and Python dirs)
      └─ setup      new user namespace (uid 1000 inside, still nobody outside), new network
         (judge)    (no interfaces up), mount, pid, ipc and uts namespaces; private tmpfs on /tmp
                    and /dev/shm. It stays outside the new pid namespace, so the program cannot
                    name it (no signals, no /proc entry), and is non-dumpable. Waits for the
                    request, hands the program its descriptors, enforces the wall clock and
                    reports how the run ended; in tests mode it is the judge: runs the task's
                    tests (runtime/judge.py) under the same limits, without capabilities, and
                    alone holds the report pipe.
          └─ program  pid 1 of the new pid namespace: mounts its /proc, then rlimits, no
                      capabilities, no_new_privs, empty environment, cwd /tmp; runs the model's
                      code (runtime/program.py), and in tests mode answers the judge's calls by
                      value over two pipes. When it exits, or is killed (by the setup process, or
                      by the kernel when the setup process dies), the kernel kills every process
                      left in its namespace (fork bombs, daemonized children).

Without namespaces (kernel or container forbids them) the same tree runs with rlimits, a new
session, a private temporary directory and a Python audit hook; see docs/verifiers.md.

This script is small on purpose: the pieces live in ``runtime/`` beside it (standard library
only), loaded as the package ``passband_sandbox`` before the server isolates itself, because
the repository is not on ``sys.path`` (``-I``) and not visible after the pivot to the new root.
"""

from __future__ import annotations

import errno
import gc
import importlib.util
import io
import json
import os
import signal
import socket
import sys

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime")
RUNTIME_MODULES = ("wire", "views", "isolation", "audit", "program", "judge", "supervisor")

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


def load_runtime():
    """Import runtime/ as the package ``passband_sandbox`` (no repository on sys.path)."""
    spec = importlib.util.spec_from_file_location(
        "passband_sandbox", os.path.join(RUNTIME, "__init__.py"), submodule_search_locations=[RUNTIME]
    )
    assert spec is not None and spec.loader is not None  # a file location always gives both
    package = importlib.util.module_from_spec(spec)
    sys.modules["passband_sandbox"] = package
    spec.loader.exec_module(package)
    for name in RUNTIME_MODULES:
        importlib.import_module(f"passband_sandbox.{name}")
    return package


def start_spare(control: socket.socket, namespaced: bool, maxima: dict) -> socket.socket | None:
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
        sys.modules["passband_sandbox.supervisor"].prepare_spare(theirs, namespaced, maxima)
    theirs.close()
    return ours


def serve(control: socket.socket, namespaced: bool, maxima: dict) -> None:
    """Hand each request to the spare sandbox prepared during the previous one, then prepare
    the next spare while that request runs."""
    write_status = sys.modules["passband_sandbox.supervisor"].write_status
    request_fds = sys.modules["passband_sandbox.supervisor"].REQUEST_FDS
    spare = start_spare(control, namespaced, maxima)
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
        if len(fds) != request_fds:
            for fd in fds:
                os.close(fd)
            continue
        for _attempt in range(2):
            if spare is None:
                spare = start_spare(control, namespaced, maxima)
            if spare is None:
                write_status(fds[-1], event="error", message="sandbox server could not fork")
                break
            try:
                socket.send_fds(spare, [b"r"], fds)
                break
            except OSError:
                spare.close()  # that spare died; prepare another and try once more
                spare = None
        else:
            write_status(fds[-1], event="error", message="sandbox spare processes keep dying")
        if spare is not None:
            spare.close()
        for fd in fds:
            os.close(fd)
        spare = start_spare(control, namespaced, maxima)


def warm_up() -> None:
    """Do once here what every run does first, so that forked runs inherit it done.

    The first compile() in a process initialises the parser and AST types (over a millisecond,
    more than the rest of a typical run); json and text streams have first-use costs too.
    """
    namespace: dict[str, object] = {}
    exec(compile("def warm(x):\n    return [x, {'k': x}]\nassert warm(1)[0] == 1\n", "<warm-up>", "exec"), namespace)
    wire = sys.modules["passband_sandbox.wire"]
    message = wire.dumps(["value", wire.encode([1, 2.5, None, True, "x", (1,), {"k": {1}}], repr), []])
    wire.decode(message, lambda key, name: None)
    io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace").write("warm")


def main() -> None:
    options = json.loads(sys.argv[1])
    # Started with -S (no site: it imports a lot, and every import makes each fork dearer);
    # the caller passes its site-packages directories instead.
    sys.path.extend(path for path in options.get("site_packages", []) if path not in sys.path)
    control = socket.socket(fileno=int(options["control_fd"]))
    report: dict[str, object] = {"ready": True, "pid": os.getpid()}
    namespaced = bool(options["namespaces"])
    maxima = dict(options.get("maxima") or {})
    try:
        load_runtime()
        view = options.get("view") or {}
        sys.modules["passband_sandbox.views"].configure(
            restricted=bool(view.get("restricted")), packages=list(view.get("packages") or []), namespaced=namespaced
        )
        sys.modules["passband_sandbox.isolation"].name_process("pb-server")
        if namespaced:
            report["user"] = sys.modules["passband_sandbox.isolation"].enter_server_namespaces()
        for name in PREIMPORTED:
            try:
                __import__(name)
            except ImportError:
                pass
        warm_up()
        sys.modules["passband_sandbox.isolation"].prepare_interpreter()
    except BaseException as error:  # noqa: BLE001
        print(json.dumps({"ready": False, "error": str(error)}), flush=True)
        os._exit(1)
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
    serve(control, namespaced, maxima)


if __name__ == "__main__":
    main()
