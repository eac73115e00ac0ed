"""The interface every world provider implements, built-in or installed: one ``WorldProvider`` object that
turns a task version into the worlds its episodes act on.

A provider *claims* the tasks whose world it gives (``claims(task)``), then, once per batch of a task's
episodes on a worker, *prepares* them (``prepare(task, options)``: load what every episode shares, or raise
``WorldMissing`` when this worker cannot) and opens one world per episode (``TaskWorlds.episode(seed=...)``, a
context manager giving an ``EpisodeWorld``: the world, the messages and tools the model gets). Episode
generation (calibration/services/rounds.py) is one loop over whatever provider claims the task.

What goes wrong is named by the exception, and each one has one meaning everywhere:

* ``WorldMissing``: this worker cannot give the world at all (a plug-in not installed here, a snapshot it
  cannot read). The samples wait, like for a model server that is down; nothing is stored.
* ``WorldFailed``: the world failed the episode in a way that would repeat (a reset that fails after a
  bounded retry). The task's outcome, stored as the world's, never the model's.
* ``engine.episodes.remote_mcp.RemoteUnavailable``: a remote server could not be had for this episode
  (down, busy, its tools changed). An infrastructure failure: not stored, asked for again.

Whatever the provider, the episode runner offers the model only the task's tools and refuses any other call
before the world sees it (engine/episodes/offered.py): a new provider inherits that rule by going through the
door. Registration and discovery: engine/worlds/registry.py; how to write one: docs/environments.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.episodes.world import World

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


class WorldMissing(Exception):
    """This worker cannot give the task's world; the message says what is missing, ``world`` names the world
    (as ``TaskWorlds.name`` would) for the environment's health."""

    def __init__(self, message: str, *, world: str) -> None:
        super().__init__(message)
        self.world = world


class WorldFailed(Exception):
    """The world failed the episode in a way that would repeat; the message names what failed."""


@dataclass(frozen=True)
class RemoteServer:
    """The remote server a task's environment is on, as the host lends it to a provider.

    ``client_config()`` gives how this process reaches it (an McpServerConfig or OpenEnvServerConfig; raises
    RemoteUnavailable when it may not); ``session_slot()`` holds one of the server's session slots for a block
    (raises RemoteUnavailable "busy"); ``tools_guard(offered, allowed)`` raises RemoteUnavailable
    "schema_changed" when a session offers tools other than the accepted ones."""

    name: str
    protocol: str
    client_config: Callable[[], Any]
    session_slot: Callable[[], AbstractContextManager[Any]]
    tools_guard: Callable[[list[dict[str, Any]], tuple[str, ...]], None]


@dataclass(frozen=True)
class RemoteEndpoint:
    """How this process reaches a server of an installed provider's remote protocol (what its
    ``RemoteServer.client_config()`` gives): the URL staff registered, the bearer header read from the variable
    the operator declared for its origin, and the seconds per request. ``client()`` is an httpx client that
    leaves only through the outbound policy (resolved address checked, no redirects): the door's rule, inherited
    by every protocol that connects through it. In an installed provider's helper, ``relay`` is set and the
    client's requests are made by the host (engine/worlds/remote_relay.py); there ``headers`` are empty."""

    name: str
    url: str
    headers: Mapping[str, str]
    timeout_s: float
    relay: Callable[[dict[str, Any]], dict[str, Any]] | None = field(default=None, compare=False, repr=False)

    def client(self) -> Any:
        if self.relay is not None:
            from engine.worlds.remote_relay import relay_client

            return relay_client(self)
        from engine.outbound import http_client

        return http_client(timeout_s=self.timeout_s, headers=dict(self.headers))


@dataclass(frozen=True)
class RemoteProtocol:
    """A kind of remote server a provider gives worlds on. Staff register servers of it under the provider's
    name (the server's ``protocol``), by URL; the provider claims the tasks whose server speaks it.

    label: what pages call such a server ("MCP server").
    list_tools(endpoint) -> [OpenAI function schemas]: the tools a server offers now, for its registration's
        check and its "check again" (each episode's tools are then held to the accepted ones, ``tools_guard``).
        None: the host lists them (Passband's own protocols).
    """

    label: str
    list_tools: Callable[[RemoteEndpoint], list[dict[str, Any]]] | None = None


@dataclass(frozen=True)
class WorldTask:
    """What a provider sees of one task version: its prompt (chat messages), the tools it offers, its verifier
    config, and the remote server its environment is on (None: not on one)."""

    prompt: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    verifier: Mapping[str, Any]
    server: RemoteServer | None = None


@dataclass(frozen=True)
class WorldOptions:
    """How worlds are run for one batch: seconds per tool call, and how often a world that cannot reset is
    tried before its failure is the task's outcome."""

    tool_seconds: float = 5.0
    reset_tries: int = 3


@dataclass(frozen=True)
class EpisodeWorld:
    """One episode's world, open: the world (``engine.episodes.world.World``), the messages the model starts
    from, the tools it is offered, the environment's name and the world's seed for the transcript."""

    world: World
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    environment: str
    world_seed: int


class TaskWorlds(Protocol):
    """A task's worlds on this worker, prepared once per batch of its episodes."""

    @property
    def name(self) -> str:
        """The world's name on the environment's health page."""
        ...

    def episode(self, *, seed: int) -> AbstractContextManager[EpisodeWorld]:
        """One rollout's world, open for the block; raises WorldFailed or RemoteUnavailable."""
        ...


@dataclass(frozen=True)
class ProviderExample:
    """A self-contained task the provider claims, for the contract test (tests/engine/worlds): the task, and
    a tool call ``(name, arguments)`` its world must answer with status ``ok``."""

    task: WorldTask
    call: tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per registered provider
class WorldProvider:
    """One kind of world.

    name: the provider's name (lowercase letters, digits, '-', '_'); the entry point's name when installed.
    claims(task) -> bool: whether this provider gives ``task`` its world. Built-ins are asked first, in order.
    prepare(task, options) -> TaskWorlds: the task's worlds on this worker; raises WorldMissing when it cannot.
    examples: self-contained tasks for the contract test; ``examples_unavailable`` says why there are none.
    description: one line for listings. version: the provider's version.
    remote: the remote protocol it gives worlds on (``RemoteProtocol``), None for worlds that are not on a
        registered server. Its name is the provider's: a new protocol needs no change to Passband.
    """

    name: str
    claims: Callable[[WorldTask], bool]
    prepare: Callable[[WorldTask, WorldOptions], TaskWorlds]
    examples: tuple[ProviderExample, ...] = ()
    examples_unavailable: str = ""
    description: str = ""
    version: str = "1"
    remote: RemoteProtocol | None = None


def provider_problems(provider: Any) -> list[str]:
    """What is wrong with a would-be provider, as sentences that say what to fix; [] when well-formed."""
    if not isinstance(provider, WorldProvider):
        return [f"is a {type(provider).__name__}, not an engine.worlds.provider.WorldProvider"]
    problems = []
    if not isinstance(provider.name, str) or not NAME_PATTERN.match(provider.name):
        problems.append(f"name {provider.name!r} must be lowercase letters, digits, '-' and '_' (at most 40)")
    for hook in ("claims", "prepare"):
        if not callable(getattr(provider, hook)):
            problems.append(f"{hook} must be callable")
    if not all(isinstance(example, ProviderExample) for example in provider.examples):
        problems.append("examples must be ProviderExample objects")
    elif not provider.examples and not provider.examples_unavailable:
        problems.append("give at least one ProviderExample (or say in examples_unavailable why there can be none)")
    if not isinstance(provider.version, str) or not provider.version:
        problems.append("version must be a non-empty string")
    remote = provider.remote
    if remote is not None and not (
        isinstance(remote, RemoteProtocol)
        and isinstance(remote.label, str)
        and remote.label.strip()
        and (remote.list_tools is None or callable(remote.list_tools))
    ):
        problems.append("remote must be a RemoteProtocol with a label and, if any, a callable list_tools")
    return problems
