"""The worlds of tasks whose environment is on a remote server: one session of the server per episode, within
the server's session cap, its tools checked against the accepted ones before the model sees them. An MCP
session (engine/episodes/remote_mcp.py) offers the tools the task lists (all of the server's when it lists
none); an OpenEnv /ws session (engine/episodes/remote_openenv.py) is reset with the task's seed and its first
observation follows the prompt. A server that cannot be had is RemoteUnavailable (infrastructure), a tool it
cannot offer to a model one too (reason "bad_schema")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.episodes.remote_mcp import McpServerConfig, McpWorld, RemoteSchemaError, RemoteUnavailable
from engine.episodes.remote_openenv import OpenEnvWorld
from engine.worlds.provider import (
    EpisodeWorld,
    RemoteProtocol,
    RemoteServer,
    WorldOptions,
    WorldProvider,
    WorldTask,
)


@dataclass
class RemoteWorlds:
    """One task's sessions of its server."""

    task: WorldTask
    server: RemoteServer

    @property
    def name(self) -> str:
        return f"{self.server.protocol}:{self.server.name}"

    def _world(self) -> McpWorld | OpenEnvWorld:
        """The world of one episode on the server, by its protocol (not yet open)."""
        config = self.server.client_config()
        verifier = self.task.verifier
        if not isinstance(config, McpServerConfig):
            seed = verifier.get("seed")
            return OpenEnvWorld(config=config, seed=int(seed) if seed is not None else None)
        # A task that lists tools offers only those of the server's; one that lists none, all of them.
        allowed = tuple(str((tool.get("function") or tool).get("name", "")) for tool in self.task.tools or [])
        return McpWorld(config=config, reward_arguments=verifier.get("reward_arguments") or {}, allowed=allowed)

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        server = self.server
        with server.session_slot():
            try:
                world = self._world()
                with world:
                    server.tools_guard(world.tool_schemas, getattr(world, "allowed", ()))
                    yield EpisodeWorld(
                        world=world,
                        messages=[*self.task.prompt, *world.opening_messages],
                        tools=world.tool_schemas,
                        environment=world.environment,
                        world_seed=world.seed,
                    )
            except RemoteSchemaError as error:
                raise RemoteUnavailable(f"server {server.name}: {error}", reason="bad_schema") from None


def _on(protocol: str) -> Any:
    def claims(task: WorldTask) -> bool:
        return task.server is not None and task.server.protocol == protocol

    claims.__doc__ = f"A task whose environment is on a {protocol} server."
    return claims


def prepare(task: WorldTask, options: WorldOptions) -> RemoteWorlds:
    """The task's sessions; nothing is opened until an episode asks."""
    assert task.server is not None
    return RemoteWorlds(task=task, server=task.server)


def _provider(protocol: str, *, label: str, description: str, workers_test: str) -> WorldProvider:
    return WorldProvider(
        name=protocol,
        claims=_on(protocol),
        prepare=prepare,
        description=description,
        examples_unavailable=f"a remote world needs a running server; tests/calibration/{workers_test} probes one",
        remote=RemoteProtocol(label=label),
    )


MCP = _provider(
    "mcp",
    label="MCP server",
    description="one session of the environment's MCP server per episode",
    workers_test="test_mcp_workers.py",
)
OPENENV = _provider(
    "openenv",
    label="OpenEnv server",
    description="one /ws session of the environment's OpenEnv server per episode, reset with the task's seed",
    workers_test="test_openenv_workers.py",
)
