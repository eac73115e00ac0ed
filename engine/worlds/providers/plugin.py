"""The world of a task on a tool-environment plug-in (engine/episodes/plugins.py): the environment its
verifier names, reset from the task's seed in the sandbox, each tool call a sandbox run (a stateful plug-in's
world: one sandboxed process for the whole episode, engine/episodes/stateful.py).

A plug-in that cannot reset from a task's seed fails the same way every time (the seed is the task's, not the
rollout's): the world is tried ``options.reset_tries`` times (a crash or a time-out under load may be
passing), then the failure is the task's outcome for every episode of the batch (WorldFailed), named for what
failed, and not tried again for the rest of the batch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.episodes import plugin_packages, plugins
from engine.episodes import world as episode_world
from engine.episodes.stateful import StatefulWorld
from engine.worlds.provider import (
    EpisodeWorld,
    ProviderExample,
    WorldFailed,
    WorldMissing,
    WorldOptions,
    WorldProvider,
    WorldTask,
)


def claims(task: WorldTask) -> bool:
    """A task not on a remote server that offers tools and names a plug-in environment."""
    return task.server is None and bool(task.tools) and bool(task.verifier.get("environment"))


@dataclass
class PluginWorlds:
    """The worlds of one plug-in task on this worker."""

    task: WorldTask
    options: WorldOptions
    name: str
    seed: int
    failure: str = field(default="")

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        world = self._ready()
        try:
            yield EpisodeWorld(
                world=world,
                messages=self.task.prompt,
                tools=self.task.tools,
                environment=self.name,
                world_seed=self.seed,
            )
        finally:
            if isinstance(world, StatefulWorld):
                world.close()  # the episode's process ends with the episode

    def _ready(self) -> episode_world.SandboxedWorld | StatefulWorld:
        """A world reset in the sandbox (a stateful plug-in's: its own process, for the episode); WorldFailed
        after the bounded retry (remembered for the batch)."""
        if self.failure:
            raise WorldFailed(self.failure)
        tries = max(1, self.options.reset_tries)
        last = ""
        stateful = plugins.get(self.name).stateful
        for attempt in range(tries):
            world = (StatefulWorld if stateful else episode_world.SandboxedWorld)(
                environment=self.name, seed=self.seed, tool_seconds=self.options.tool_seconds
            )
            try:
                world.reset()
            except episode_world.WorldResetError as failure:
                last = str(failure)
                if attempt + 1 < tries:
                    time.sleep(0.2 * (attempt + 1))
                continue
            return world
        self.failure = f"world {self.name}: {last} (tried {tries} times)"
        raise WorldFailed(self.failure)


def prepare(task: WorldTask, options: WorldOptions) -> PluginWorlds:
    """The task's plug-in worlds; WorldMissing when this worker lacks the plug-in (installed elsewhere, or
    refused here) or cannot install its own packages (its lock, on first use: engine/episodes/plugin_packages.py)."""
    name = str(task.verifier["environment"])
    try:
        episode_world.environment(name)
        plugin_packages.install(plugins.get(name))
    except plugins.UnknownEnvironment as error:
        raise WorldMissing(str(error), world=name) from None
    except plugin_packages.InstallFailed as error:
        raise WorldMissing(
            f"environment {name}: its packages could not be installed here: {error}", world=name
        ) from None
    return PluginWorlds(task=task, options=options, name=name, seed=int(task.verifier.get("seed", 0)))


PROVIDER = WorldProvider(
    name="plugin",
    claims=claims,
    prepare=prepare,
    description="a tool-environment plug-in's world, reset from the task's seed, its tools run in the sandbox",
    examples=(
        ProviderExample(
            task=WorldTask(
                prompt=[{"role": "user", "content": "Read customer 1."}],
                tools=[{"type": "function", "function": {"name": "get_record", "parameters": {"type": "object"}}}],
                verifier={"kind": "state_check", "environment": "backoffice", "seed": 3, "checks": []},
            ),
            call=("get_record", {"table": "customers", "id": 1}),
        ),
    ),
)
