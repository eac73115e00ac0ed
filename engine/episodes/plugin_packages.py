"""What a plug-in's sandbox sees besides the standard library and its own source: the packages it declares.

Two declarations (docs/environments.md, "Packages your tools need"):

* ``REQUIREMENTS = "requirements.lock"``: a lock shipped inside the plug-in's package (the file's name, beside
  the module that declares it), every requirement pinned with its hashes. Passband installs it hash-pinned into
  a package environment of the plug-in's own (engine/sandbox/package_environments.py), once per host, cached by
  the lock's hash: on a worker's first use of the plug-in, or ahead of time with ``manage.py environments
  --install``. Its sandbox sees that folder, never Passband's packages.
* ``DEPENDENCIES = ("pandas",)``: distributions installed beside Passband, in its interpreter, mounted
  read-only one by one (with what they require).

Both may be declared; a package of the lock wins over one of the same name from DEPENDENCIES.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from engine.sandbox import package_environments
from engine.sandbox.package_environments import InstallFailed, Lock, LockError
from engine.sandbox.view import MissingDistribution, SandboxView

if TYPE_CHECKING:
    from engine.episodes.plugins import Plugin

__all__ = ["DeclarationError", "InstallFailed", "declared", "install", "lock_report", "sandbox_view"]


class DeclarationError(ValueError):
    """DEPENDENCIES or REQUIREMENTS cannot be used; the message says what to fix."""


def declared(contract: Any, *, source: ModuleType) -> tuple[tuple[str, ...], Lock | None]:
    """The distributions (DEPENDENCIES) and the lock (REQUIREMENTS, a file beside ``source``'s module) that
    ``contract`` (the plug-in module, or a stateful class seen as one) declares; raises DeclarationError."""
    name = getattr(contract, "__name__", source.__name__)
    dependencies = getattr(contract, "DEPENDENCIES", ())
    if not isinstance(dependencies, (list, tuple)) or not all(isinstance(item, str) and item for item in dependencies):
        raise DeclarationError(f"{name}.DEPENDENCIES must be a tuple of distribution names, e.g. ('numpy',)")
    try:
        SandboxView.of(distributions=tuple(dependencies)).entries()
    except MissingDistribution as error:
        raise DeclarationError(f"{name}.DEPENDENCIES: {error}; install it beside the plug-in") from None
    requirements = getattr(contract, "REQUIREMENTS", None)
    if requirements is None:
        return tuple(dependencies), None
    if not isinstance(requirements, str) or not requirements or Path(requirements).is_absolute():
        raise DeclarationError(
            f"{name}.REQUIREMENTS must be the name of a lock file inside the package, e.g. 'requirements.lock'"
        )
    folder = Path(source.__file__ or ".").parent
    try:
        lock = package_environments.read_lock(folder / requirements)
    except LockError as error:
        raise DeclarationError(f"{name}.REQUIREMENTS: {error}") from None
    return tuple(dependencies), lock


def install(plugin: Plugin) -> Path | None:
    """The plug-in's installed package environment on this host (installed now when it is not yet), None when
    it declares no lock; raises InstallFailed."""
    if plugin.lock is None:
        return None
    return package_environments.install(plugin.lock)


def lock_report(plugin: Plugin) -> dict[str, Any] | None:
    """The plug-in's lock as the environment page and ``manage.py environments`` list it: its file, its sha256,
    each package with its pinned version and the first digits of each file's sha256, and whether its package
    environment is installed on this host (``installed``; ``installed_at``: the folder, None when not). None when
    it declares no lock."""
    lock = plugin.lock
    if lock is None:
        return None
    site = package_environments.installed_site(lock)
    return {
        "file": lock.path.name,
        "sha256": lock.sha256,
        "requirements": list(lock.requirements),
        "packages": [
            {"name": package.name, "version": package.version, "hashes": list(package.hash_prefixes())}
            for package in lock.packages
        ],
        "installed": site is not None,
        "installed_at": str(site) if site is not None else None,
    }


def sandbox_view(plugin: Plugin) -> SandboxView:
    """What the plug-in's tool calls see: the standard library, its DEPENDENCIES and its own package environment
    (installed first when this host lacks it; raises InstallFailed)."""
    site = install(plugin)
    return SandboxView.of(distributions=plugin.dependencies, folders=(str(site),) if site is not None else ())
