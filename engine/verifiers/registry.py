"""The verifier-kind registry: which kinds exist, built-in or installed, and the one object each one is.

Built-in kinds are registered by name (``BUILTIN_KINDS``: the module ``engine.verifiers.kinds.<name>`` and
its ``VERIFIER_KIND``), the way pytest registers its own plugins; installed packages declare theirs under
the entry point group ``passband.verifiers`` (the entry point's name is the kind's name, its value names a
``VerifierKind`` object). Built-ins are registered first and alone can fail loudly: an installed package that
cannot be imported, declares a malformed kind or reuses a taken name is refused and listed in ``errors()``,
never fatal, and never loses a built-in.

An installed kind's code never runs in the calling process: its package is imported only in a helper process
that answers its declaration (name, traits, examples) as data (engine/declarations.py); its ``parse_config``,
``check`` and audit hooks run in locked-down helper processes (engine/verifiers/plugin_kinds.py), and the
registry hands out a proxy with the declared traits.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata

from engine import declarations
from engine.registry import Refused, distribution_of, installed_entry_points
from engine.verifiers.kind import VerifierKind, kind_problems

logger = logging.getLogger("engine.verifiers")

GROUP = "passband.verifiers"
BUILTIN_KINDS = (
    "exact",
    "regex",
    "numeric",
    "math",
    "code",
    "json",
    "tool_calls",
    "llm_judge",
    "state_check",
    "episode_reward",
    "reasoning_gym",
    "verifiers_reward",
    "repo_tests",
)
BUILTIN = "passband"


class KindError(ValueError):
    """A kind cannot be registered: malformed, or its name is taken. The message says what to fix."""


@dataclass(frozen=True)
class Registered:
    """A registered kind: the object that runs (for an installed kind, its isolating proxy), where it comes
    from (``passband`` for built-ins, else the distribution) and that distribution's version."""

    kind: VerifierKind
    distribution: str
    version: str
    source: str  # the module (built-in) or entry point value (installed)

    @property
    def builtin(self) -> bool:
        return self.distribution == BUILTIN


class KindRegistry:
    """Kinds by name. ``register`` is the API built-ins and tests use; ``load_entry_points`` the door for
    installed packages."""

    def __init__(self) -> None:
        self._kinds: dict[str, Registered] = {}
        self._refused: list[Refused] = []
        self._lock = threading.Lock()

    def register(self, kind: VerifierKind, *, distribution: str = BUILTIN, version: str = "", source: str = "") -> None:
        """Add one kind. Raises KindError when it is malformed or its name is taken."""
        problems = kind_problems(kind)
        if problems:
            raise KindError(f"verifier kind {getattr(kind, 'name', '?')!r}: " + "; ".join(problems))
        with self._lock:
            if kind.name in self._kinds:
                other = self._kinds[kind.name]
                raise KindError(f"verifier kind {kind.name!r} is already registered by {other.distribution}")
            self._kinds[kind.name] = Registered(kind, distribution, version, source)

    def register_builtin(self, name: str) -> None:
        """Register Passband's own kind ``name`` from ``engine.verifiers.kinds.<name>`` (its VERIFIER_KIND)."""
        module = importlib.import_module(f"engine.verifiers.kinds.{name}")
        kind = module.VERIFIER_KIND
        if kind.name != name:
            raise KindError(f"engine.verifiers.kinds.{name} declares kind {kind.name!r}")
        self.register(kind, source=module.__name__)

    def unregister(self, name: str) -> None:
        """Forget a kind (tests that register one of their own use this to clean up)."""
        with self._lock:
            self._kinds.pop(name, None)

    def load_entry_points(self, entry_points: Iterable[metadata.EntryPoint]) -> None:
        """Register each installed kind; refuse (and log) the ones that cannot be, never raising."""
        from engine.verifiers.plugin_kinds import isolated

        for entry_point in sorted(entry_points, key=lambda point: (point.name, point.value)):
            distribution, version = distribution_of(entry_point)
            try:
                declared = _declared(entry_point)
                if declared.name != entry_point.name:
                    raise KindError(f"the entry point is named {entry_point.name!r} but the kind {declared.name!r}")
                if declared.name in self._kinds and self._kinds[declared.name].builtin:
                    raise KindError(f"{declared.name!r} is one of Passband's own kinds; choose another name")
                kind = isolated(declared, source=entry_point.value)
                self.register(
                    kind, distribution=distribution or entry_point.value, version=version, source=entry_point.value
                )
            except Exception as error:  # noqa: BLE001 - a broken package is reported, never fatal
                refused = Refused(entry_point.name, entry_point.value, distribution, version, str(error))
                logger.warning("verifier kind %s (%s) refused: %s", entry_point.name, entry_point.value, error)
                self._refused.append(refused)

    def get(self, name: str) -> VerifierKind | None:
        registered = self._kinds.get(name)
        return registered.kind if registered is not None else None

    def entry(self, name: str) -> Registered | None:
        return self._kinds.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._kinds)

    def entries(self) -> tuple[Registered, ...]:
        return tuple(self._kinds.values())

    def refused(self) -> tuple[Refused, ...]:
        return tuple(self._refused)


def _declared(entry_point: metadata.EntryPoint) -> VerifierKind:
    """The kind an installed entry point declares, read in a helper process (its package is never imported
    here), its hooks stand-ins that ``isolated`` replaces."""
    try:
        kind = declarations.kind_from(declarations.declared(GROUP, entry_point)["kind"])
    except declarations.DeclarationRefused as refused:
        raise KindError(refused.naming(entry_point.value)) from None
    except KeyError:
        raise KindError(f"{entry_point.value} is not a verifier kind (its helper declared another object)") from None
    problems = kind_problems(kind)
    if problems:
        raise KindError(f"{entry_point.value} " + "; ".join(problems))
    return kind


def build(entry_points: Iterable[metadata.EntryPoint] | None = None) -> KindRegistry:
    """A registry with every built-in kind, then the installed ones (``entry_points``, default: those of the
    ``passband.verifiers`` group)."""
    built = KindRegistry()
    for name in BUILTIN_KINDS:
        built.register_builtin(name)
    installed = installed_entry_points(GROUP) if entry_points is None else list(entry_points)
    declarations.read(GROUP, installed)  # a few helpers at a time, once per process
    built.load_entry_points(installed)
    return built


@functools.lru_cache(maxsize=1)
def kind_registry() -> KindRegistry:
    """The process's registry, built on first use."""
    return build()


def refresh() -> None:
    """Forget the registry: the next use discovers the installed kinds again."""
    kind_registry.cache_clear()


def errors() -> tuple[Refused, ...]:
    """The installed kinds that were refused, with why."""
    return kind_registry().refused()


def kind_named(name: object) -> VerifierKind | None:
    """The registered kind called ``name``, or None."""
    return kind_registry().get(name) if isinstance(name, str) else None


def all_kinds() -> tuple[VerifierKind, ...]:
    """Every registered kind, built-ins first."""
    return tuple(entry.kind for entry in kind_registry().entries())
