"""What a sandbox's filesystem shows of Python, and the refusal of nested user namespaces.

Standard library only (loaded by server.py before the server isolates itself). A server started with
a restricted view (``configure(restricted=True, packages=[...])``) shows its runs the standard
library and nothing installed: every ``site-packages``/``dist-packages`` directory of the bound
Python and system directories is covered by an empty read-only tmpfs, a virtualenv is not bound at
all, and only the given package entries (top-level files and folders of the distributions the caller
named) appear, read-only, under ``PACKAGES_MOUNT``. What is not mounted does not exist for the run:
no import hook to remove, no path to append.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile

PACKAGES_MOUNT = "/passband-packages"
SYSTEM_PREFIXES = ("/usr", "/usr/local")
SITE_PATTERNS = ("lib*/python3*/site-packages", "lib*/python3*/dist-packages", "lib*/python3/dist-packages")

VIEW: dict = {"restricted": False, "packages": []}


def configure(*, restricted: bool, packages: list[str], namespaced: bool) -> None:
    """Set the server's view before it builds its root (server.py, from its options). Without namespaces
    (the fallback) the view is only ``sys.path``: a folder of links to the allowed entries, no boundary."""
    VIEW["restricted"] = bool(restricted)
    VIEW["packages"] = [path for path in packages if isinstance(path, str) and os.path.isabs(path)]
    if not VIEW["restricted"]:
        return
    sys.path[:] = [path for path in sys.path if path and not _is_site_directory(path)]
    if not VIEW["packages"]:
        return
    if namespaced:
        sys.path.append(PACKAGES_MOUNT)
        return
    links = tempfile.mkdtemp(prefix="passband-view-")
    for source in VIEW["packages"]:
        if not os.path.lexists(os.path.join(links, os.path.basename(source))):
            os.symlink(source, os.path.join(links, os.path.basename(source)))
    sys.path.append(links)


def python_prefixes() -> list[str]:
    """The interpreter's prefixes to bind: without the virtualenv's in a restricted view (its folder
    holds nothing of the standard library, and all of the caller's packages)."""
    if VIEW["restricted"]:
        return [sys.base_prefix, sys.base_exec_prefix]
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]


def site_directories() -> list[str]:
    """Every installed-packages directory of the Python prefixes and the system, real paths, deduplicated."""
    found: set[str] = set()
    for prefix in {*SYSTEM_PREFIXES, sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix}:
        for pattern in SITE_PATTERNS:
            for path in glob.glob(os.path.join(prefix, pattern)):
                if os.path.isdir(path):
                    found.add(os.path.realpath(path))
    return sorted(found)


def _is_site_directory(path: str) -> bool:
    return os.path.basename(os.path.normpath(path)) in ("site-packages", "dist-packages")


def apply(new_root: str, mount, origin=lambda source: source) -> None:
    """In the server's new root, before it is made read-only: hide the installed packages and bind the
    allowed entries. ``mount``: isolation.mount (passed in, to keep this module free of the setup code);
    ``origin(source)``: the path to bind ``source`` from (a package under /tmp is reached through a
    descriptor of /tmp taken before the new root's tmpfs covered it)."""
    if not VIEW["restricted"]:
        return
    for directory in site_directories():
        target = new_root + directory
        if os.path.isdir(target):
            mount("tmpfs", target, "tmpfs", 0x2 | 0x4, "mode=0555,size=4k,nr_inodes=16")  # nosuid, nodev
    if not VIEW["packages"]:
        return
    os.makedirs(new_root + PACKAGES_MOUNT)
    for source in VIEW["packages"]:
        target = os.path.join(new_root + PACKAGES_MOUNT, os.path.basename(source))
        reached = origin(source)
        if os.path.lexists(target) or not os.path.exists(reached):
            continue
        if os.path.isdir(reached):
            os.makedirs(target)
        else:
            open(target, "w").close()
        mount(reached, target, None, 0x1000 | 0x4000)  # MS_BIND | MS_REC


def refuse_nested_user_namespaces() -> None:
    """In a run's fresh user namespace, while its setup still holds that namespace's capabilities: allow
    no user namespace below it (what bubblewrap's --disable-userns does). The limit counts in every
    ancestor, so neither the program nor anything it starts can unshare or clone a new one (ENOSPC)."""
    fd = os.open("/proc/sys/user/max_user_namespaces", os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)
