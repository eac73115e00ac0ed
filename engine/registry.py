"""A registry of named implementations of one interface, built-in or installed, the way pytest keeps its
plugins: Passband's own are registered by name through ``register``; installed packages declare theirs under
an entry point group and come in through ``load_entry_points``. Built-ins are registered first and alone can
fail loudly: an installed package that cannot be imported, declares something malformed or reuses a taken
name is refused and listed in ``refused()``, never fatal, and never loses a built-in.

World providers (engine/worlds/registry.py: installed ones registered as the isolating proxy of
engine/worlds/isolated.py) and export formats (engine/formats/registry.py) are registries of this kind;
verifier kinds (engine/verifiers/registry.py) keep their own, which runs installed kinds isolated.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Generic, TypeVar

logger = logging.getLogger("engine.registry")

BUILTIN = "passband"
T = TypeVar("T")


class RegistryError(ValueError):
    """Something cannot be registered: malformed, or its name is taken. The message says what to fix."""


@dataclass(frozen=True)
class Registered(Generic[T]):
    """A registered implementation, where it comes from (``passband`` for built-ins, else the distribution),
    that distribution's version and the module or entry point value it was loaded from."""

    item: T
    distribution: str
    version: str
    source: str

    @property
    def builtin(self) -> bool:
        return self.distribution == BUILTIN


@dataclass(frozen=True)
class Refused:
    """An installed implementation that was not registered, and why."""

    name: str
    value: str
    distribution: str
    version: str
    error: str


class Registry(Generic[T]):
    """Implementations by name. ``what`` names them in messages ("world provider"); ``problems(item)`` says
    what is wrong with a would-be one ([] when well-formed); ``skip(loaded)`` marks entry point objects of the
    group that belong to another door (they are neither registered nor refused); ``installed(loaded, source)``
    is what an installed one is registered as (an isolating proxy that runs its code out of process, loaded
    there from ``source``, its entry point's value); ``load(entry_point)`` is what an entry point declares
    (default: its object, imported here; world providers read a declaration in a helper process instead,
    engine/declarations.py)."""

    def __init__(
        self,
        *,
        what: str,
        problems: Callable[[Any], list[str]],
        skip: Callable[[Any], bool] = lambda loaded: False,
        installed: Callable[[Any, str], Any] = lambda loaded, source: loaded,
        load: Callable[[metadata.EntryPoint], Any] | None = None,
    ) -> None:
        self.what = what
        self._problems = problems
        self._skip = skip
        self._installed = installed
        self._load = load or _load
        self._items: dict[str, Registered[T]] = {}
        self._refused: list[Refused] = []
        self._lock = threading.Lock()

    def register(self, item: T, *, distribution: str = BUILTIN, version: str = "", source: str = "") -> None:
        """Add one implementation. Raises RegistryError when it is malformed or its name is taken."""
        name = getattr(item, "name", "?")
        problems = self._problems(item)
        if problems:
            raise RegistryError(f"{self.what} {name!r}: " + "; ".join(problems))
        with self._lock:
            if name in self._items:
                other = self._items[name]
                raise RegistryError(f"{self.what} {name!r} is already registered by {other.distribution}")
            self._items[name] = Registered(item, distribution, version, source)

    def unregister(self, name: str) -> None:
        """Forget one (tests that register their own use this to clean up)."""
        with self._lock:
            self._items.pop(name, None)

    def load_entry_points(self, entry_points: Iterable[metadata.EntryPoint]) -> None:
        """Register each installed implementation; refuse (and log) the ones that cannot be, never raising."""
        for entry_point in sorted(entry_points, key=lambda point: (point.name, point.value)):
            distribution, version = distribution_of(entry_point)
            try:
                loaded = self._load(entry_point)
                if self._skip(loaded):
                    continue
                problems = self._problems(loaded)
                if problems:
                    raise RegistryError(f"{entry_point.value} " + "; ".join(problems))
                if loaded.name != entry_point.name:
                    raise RegistryError(
                        f"the entry point is named {entry_point.name!r} but it declares {loaded.name!r}"
                    )
                if loaded.name in self._items and self._items[loaded.name].builtin:
                    raise RegistryError(f"{loaded.name!r} is one of Passband's own; choose another name")
                self.register(
                    self._installed(loaded, entry_point.value),
                    distribution=distribution or entry_point.value,
                    version=version,
                    source=entry_point.value,
                )
            except Exception as error:  # noqa: BLE001 - a broken package is reported, never fatal
                logger.warning("%s %s (%s) refused: %s", self.what, entry_point.name, entry_point.value, error)
                self._refused.append(Refused(entry_point.name, entry_point.value, distribution, version, str(error)))

    def get(self, name: str) -> T | None:
        registered = self._items.get(name)
        return registered.item if registered is not None else None

    def entry(self, name: str) -> Registered[T] | None:
        return self._items.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def items(self) -> tuple[T, ...]:
        return tuple(registered.item for registered in self._items.values())

    def entries(self) -> tuple[Registered[T], ...]:
        return tuple(self._items.values())

    def refused(self) -> tuple[Refused, ...]:
        return tuple(self._refused)


def distribution_of(entry_point: metadata.EntryPoint) -> tuple[str, str]:
    """The (name, version) of the distribution declaring ``entry_point``; ("", "") when unknown."""
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return "", ""
    return dist.metadata["Name"] or "", dist.version or ""


def _load(entry_point: metadata.EntryPoint) -> Any:
    try:
        return entry_point.load()
    except Exception as error:  # noqa: BLE001 - a stale or broken package
        raise RegistryError(f"importing {entry_point.value} failed: {type(error).__name__}: {error}") from None


def installed_entry_points(group: str) -> list[metadata.EntryPoint]:
    """The entry points of ``group``; [] when the package metadata cannot be read (never losing built-ins)."""
    try:
        return list(metadata.entry_points(group=group))
    except Exception as error:  # noqa: BLE001 - unreadable package metadata must not lose the built-ins
        logger.warning("reading the %s entry points failed: %s", group, error)
        return []
