"""Which Python a sandbox's runs see: the whole interpreter's packages, or the standard library and
named distributions only.

    >>> sandbox_for(SandboxView.of(distributions=("pytest",)))   # one fork server per view, per process

A restricted view is a filesystem fact, not an import hook: the fork server's root holds the standard
library, every installed-packages directory is covered by an empty tmpfs, a virtualenv is not there,
and the named distributions (with what they require, recursively) are bound one top-level entry at a
time under /passband-packages (runtime/views.py). Plug-in tool calls, repository grading and code
verification use it; only trusted callers (benchmarks) keep the interpreter's packages (``SandboxView()``).
Passband's own distribution is never part of a view: naming it is refused like a missing one.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from importlib import metadata

from engine.sandbox import Sandbox

REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
MAX_CACHED_VIEWS = 16
PROJECT_DISTRIBUTION = "passband"


class MissingDistribution(LookupError):
    """A distribution a view names is not installed in the sandbox's interpreter."""


@dataclass(frozen=True)
class SandboxView:
    """installed_packages: every package of the interpreter (today's code verification); otherwise the
    standard library, ``distributions`` only (names as pip knows them) and what ``folders`` hold (a plug-in's
    own package environment, engine/sandbox/package_environments.py), a folder's entries first."""

    installed_packages: bool = True
    distributions: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()

    @classmethod
    def of(cls, *, distributions: tuple[str, ...] | list[str] = (), folders: tuple[str, ...] = ()) -> SandboxView:
        names = tuple(sorted({_normal(name) for name in distributions}))
        return cls(installed_packages=False, distributions=names, folders=tuple(folders))

    def folder_entries(self) -> list[str]:
        """Absolute paths of the top-level files and folders of ``folders`` (their scripts' folder aside)."""
        entries = []
        for folder in self.folders:
            for name in sorted(os.listdir(folder)):
                if name not in ("bin", "__pycache__"):
                    entries.append(os.path.join(os.path.realpath(folder), name))
        return entries

    def entries(self) -> list[str]:
        """Absolute paths of the top-level files and folders of the named distributions and of everything
        they require (markers ignored, absent optional requirements skipped); raises MissingDistribution
        for a named one that is not installed."""
        seen: set[str] = set()
        entries: set[str] = set()
        pending = [(name, True) for name in self.distributions]
        while pending:
            name, required = pending.pop()
            if _normal(name) in seen:
                continue
            seen.add(_normal(name))
            if _normal(name) == PROJECT_DISTRIBUTION:
                raise MissingDistribution(f"{name} is Passband itself, never visible in a sandbox")
            try:
                distribution = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                if required:
                    raise MissingDistribution(f"{name} is not installed in the sandbox's Python") from None
                continue
            entries.update(_top_level_entries(distribution))
            for requirement in distribution.requires or ():
                if "extra ==" in requirement.replace('"', "").replace("'", ""):
                    continue
                found = REQUIREMENT_NAME.match(requirement)
                if found:
                    pending.append((found.group(1), False))
        # The folders' entries first: the sandbox binds the first entry of a name, so their packages win.
        return self.folder_entries() + sorted(entries)


TEST_RUNNER = ("pytest",)


def repository_view(dependencies: tuple[str, ...] = ()) -> SandboxView:
    """What a repository's tests see (grading and the repository world): the standard library, pytest and
    the repository's declared dependencies."""
    return SandboxView.of(distributions=(*TEST_RUNNER, *dependencies))


def top_level_modules(distributions: tuple[str, ...]) -> set[str]:
    """The importable top-level names that these distributions (and their requirements) provide."""
    names = set()
    for entry in SandboxView.of(distributions=distributions).entries():
        base = os.path.basename(entry)
        if base.endswith((".dist-info", ".egg-info", ".libs", ".pth", ".data")):
            continue
        names.add(base.split(".", 1)[0])
    return names


def _top_level_entries(distribution: metadata.Distribution) -> set[str]:
    root = os.path.realpath(str(distribution.locate_file("")))
    entries = set()
    for file in distribution.files or ():
        parts = file.parts
        if not parts or parts[0] in ("..", "/") or parts[0] == "__pycache__":
            continue
        path = os.path.join(root, parts[0])
        if os.path.lexists(path):
            entries.add(path)
    return entries


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_lock = threading.Lock()
_sandboxes: dict[tuple[SandboxView, str], Sandbox] = {}


def sandbox_for(view: SandboxView) -> Sandbox:
    """The sandbox of this process for ``view`` (started lazily; the isolation is
    PASSBAND_SANDBOX_ISOLATION's, as for ``default_sandbox``). Raises MissingDistribution."""
    from engine.sandbox import default_sandbox

    if view.installed_packages:
        return default_sandbox()
    isolation = os.environ.get("PASSBAND_SANDBOX_ISOLATION", "auto")
    key = (view, isolation)
    with _lock:
        sandbox = _sandboxes.get(key)
        if sandbox is None:
            sandbox = Sandbox(isolation=isolation, view=view)
            if len(_sandboxes) >= MAX_CACHED_VIEWS:
                _sandboxes.pop(next(iter(_sandboxes))).close()
            _sandboxes[key] = sandbox
        return sandbox


def _forget_after_fork() -> None:
    global _lock
    _sandboxes.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
