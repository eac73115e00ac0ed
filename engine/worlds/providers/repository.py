"""The world of a repository task (engine/repo_tasks/world.py): a fresh copy of the task's snapshot per
episode, with tools on it, every one a sandbox run. The snapshot is read once per batch; a worker that cannot
read it (storage down, not shared) cannot give the world (WorldMissing)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from engine.repo_tasks import snapshots
from engine.repo_tasks.world import ENVIRONMENT, RepoWorld
from engine.worlds.provider import EpisodeWorld, WorldMissing, WorldOptions, WorldProvider, WorldTask

REPO_TESTS = "repo_tests"  # the verifier kind of repository tasks (engine/verifiers/kinds/repo_tests.py)


def claims(task: WorldTask) -> bool:
    """A repository task (verifier kind ``repo_tests``) that offers tools, not on a remote server."""
    return task.server is None and task.verifier.get("kind") == REPO_TESTS and bool(task.tools)


@dataclass
class RepositoryWorlds:
    """One task's repository on this worker; each episode gets its own copy (its own overlay)."""

    task: WorldTask
    snapshot: bytes
    name: str = ENVIRONMENT

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        dependencies = tuple(self.task.verifier.get("dependencies") or ())
        world = RepoWorld(snapshot=self.snapshot, dependencies=dependencies)
        yield EpisodeWorld(
            world=world, messages=self.task.prompt, tools=self.task.tools, environment=ENVIRONMENT, world_seed=0
        )


def prepare(task: WorldTask, options: WorldOptions) -> RepositoryWorlds:
    """The task's repository, read from the snapshot store; WorldMissing when this worker cannot read it."""
    try:
        return RepositoryWorlds(task=task, snapshot=snapshots.load(str(task.verifier["snapshot"])))
    except snapshots.SnapshotError as error:
        raise WorldMissing(str(error), world=ENVIRONMENT) from None


PROVIDER = WorldProvider(
    name="repository",
    claims=claims,
    prepare=prepare,
    description="a fresh copy of the task's repository snapshot per episode, its tools run in the sandbox",
    examples_unavailable="a repository world needs a stored snapshot; tests/engine/worlds builds one for it",
)
