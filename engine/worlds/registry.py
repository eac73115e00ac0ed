"""The world-provider registry: which kinds of world exist, built-in or installed.

Built-in providers are registered by name (``BUILTIN_PROVIDERS``: a module of engine/worlds/providers and the
provider object in it), in the order they are asked whether they claim a task. Installed packages declare
theirs under the entry point group ``passband.environments`` (the entry point's name is the provider's name,
its value names a ``WorldProvider`` object); they are asked after the built-ins, so no package can take a
built-in's tasks. Built-ins run in this process (they are Passband's own code); an installed provider's package
is never imported here: its declaration is read in a helper process (engine/declarations.py), and it is
registered as the isolating proxy of engine/worlds/isolated.py, so its ``claims``, ``prepare`` and worlds run
in helper processes, never in a worker or web process. The same group declares tool-environment plug-ins (an
entry point naming a module or a stateful class, engine/episodes/plugins.py): those are the built-in
``plugin`` provider's worlds, not providers, and this registry passes them by. A package that cannot be
imported or declares a malformed provider is refused and listed in ``errors()``, never fatal, and never loses
a built-in.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
from collections.abc import Iterable
from importlib import metadata

from engine import declarations
from engine.registry import Refused, Registry, RegistryError, installed_entry_points
from engine.worlds.isolated import isolated
from engine.worlds.provider import (
    RemoteProtocol,
    RemoteServer,
    TaskWorlds,
    WorldMissing,
    WorldOptions,
    WorldProvider,
    WorldTask,
    provider_problems,
)

logger = logging.getLogger("engine.worlds")

GROUP = "passband.environments"
# (module of engine.worlds.providers, attribute): the order is the order providers are asked.
BUILTIN_PROVIDERS = (
    ("remote", "MCP"),
    ("remote", "OPENENV"),
    ("repository", "PROVIDER"),
    ("plugin", "PROVIDER"),
)


class _ToolEnvironment:
    """What an entry point naming a module (or a stateful environment class) declares: a tool-environment
    plug-in, the `plugin` provider's (engine/episodes/plugins.py), passed by here."""


def _plugin_environment(loaded: object) -> bool:
    return isinstance(loaded, _ToolEnvironment)


# One provider per declaration, and one proxy per declared provider and source: a registry built again
# (``refresh``) hands out the same object, and its helpers.
_DECLARED: dict[str, WorldProvider] = {}
_PROXIES: dict[tuple[int, str], tuple[WorldProvider, WorldProvider]] = {}


def _declared(entry_point: metadata.EntryPoint) -> object:
    """What an installed entry point declares, read in a helper process: its package is never imported here."""
    try:
        answer = declarations.declared(GROUP, entry_point)
    except declarations.DeclarationRefused as refused:
        raise RegistryError(refused.naming(entry_point.value)) from None
    if "environment" in answer:
        return _ToolEnvironment()
    if "provider" not in answer:
        raise RegistryError(f"{entry_point.value} is not a world provider (its helper declared another object)")
    key = json.dumps([entry_point.value, answer["provider"]], sort_keys=True)
    if key not in _DECLARED:
        _DECLARED[key] = declarations.provider_from(answer["provider"])
    return _DECLARED[key]


def _isolated(loaded: WorldProvider, source: str) -> WorldProvider:
    key = (id(loaded), source)
    if key not in _PROXIES or _PROXIES[key][0] is not loaded:
        _PROXIES[key] = (loaded, isolated(loaded, source=source))
    return _PROXIES[key][1]


def build(entry_points: Iterable[metadata.EntryPoint] | None = None) -> Registry[WorldProvider]:
    """A registry with every built-in provider, then the installed ones (``entry_points``, default: those of
    the ``passband.environments`` group)."""
    built: Registry[WorldProvider] = Registry(
        what="world provider",
        problems=provider_problems,
        skip=_plugin_environment,
        installed=_isolated,
        load=_declared,
    )
    for module_name, attribute in BUILTIN_PROVIDERS:
        module = importlib.import_module(f"engine.worlds.providers.{module_name}")
        built.register(getattr(module, attribute), source=f"{module.__name__}:{attribute}")
    installed = installed_entry_points(GROUP) if entry_points is None else list(entry_points)
    declarations.read(GROUP, installed)  # a few helpers at a time, once per process
    built.load_entry_points(installed)
    return built


@functools.lru_cache(maxsize=1)
def provider_registry() -> Registry[WorldProvider]:
    """The process's registry, built on first use."""
    return build()


def refresh() -> None:
    """Forget the registry: the next use discovers the installed providers again."""
    provider_registry.cache_clear()


def errors() -> tuple[Refused, ...]:
    """The installed providers that were refused, with why."""
    return provider_registry().refused()


def all_providers() -> tuple[WorldProvider, ...]:
    """Every registered provider, built-ins first (the order they are asked)."""
    return provider_registry().items()


def remote_protocols() -> dict[str, RemoteProtocol]:
    """The remote protocols servers may be registered with: each provider that declares one, by its name."""
    return {provider.name: provider.remote for provider in all_providers() if provider.remote is not None}


def provider_for(task: WorldTask) -> WorldProvider | None:
    """The first registered provider that claims ``task``; None for a task that is not an episode (plain
    prompt and answer). A provider whose ``claims`` raises is passed by: it cannot take another's task. A task
    on a remote server is always an episode: when no provider here speaks its protocol (its package is not
    installed on this worker), a stand-in whose ``prepare`` raises WorldMissing says so, and its samples wait."""
    for provider in all_providers():
        try:
            if provider.claims(task):
                return provider
        except Exception as error:  # noqa: BLE001 - an installed provider's bug is not this task's problem
            logger.warning("world provider %s failed to say whether it claims a task: %s", provider.name, error)
    return _unserved(task.server) if task.server is not None else None


def _unserved(server: RemoteServer) -> WorldProvider:
    def prepare(task: WorldTask, options: WorldOptions) -> TaskWorlds:
        raise WorldMissing(
            f"no world provider here gives worlds on {server.protocol} servers (server {server.name}): install the "
            "package that declares it on this worker",
            world=f"{server.protocol}:{server.name}",
        )

    return WorldProvider(
        name="unserved", claims=lambda task: False, prepare=prepare, examples_unavailable="never registered"
    )
