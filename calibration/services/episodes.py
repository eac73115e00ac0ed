"""A round's tool-use episodes: one loop over the world provider that claims the task (engine/worlds).

Which provider gives a task its world, and what each of its failures means, is engine/worlds/provider.py; this
module turns those outcomes into the round's generations, transcripts and the environment's health.
"""

from __future__ import annotations

import logging

from django.conf import settings

from calibration import metrics
from calibration.models import ProbeModel
from calibration.services.health import EpisodeAttempt, episode_health_record
from calibration.services.probe_models import backend_for_probe_model
from calibration.services.worlds import world_options, world_provider, world_task
from curation.models import TaskVersion
from engine import backends
from engine.episodes.remote_mcp import RemoteUnavailable
from engine.episodes.runner import EpisodeLimits, run_episode
from engine.worlds.provider import TaskWorlds, WorldFailed, WorldMissing, WorldTask
from engine.worlds.registry import provider_for

logger = logging.getLogger(__name__)

Outcome = tuple[backends.Generation, dict | None, EpisodeAttempt]


def is_tool_task(version: TaskVersion) -> bool:
    """A task whose rollouts are tool-use episodes: a registered world provider claims it (a plug-in
    environment's tools, a repository's, a remote MCP or OpenEnv server's, or an installed provider's)."""
    return world_provider(version) is not None


def episodes_generate(
    *, version: TaskVersion, probe_model: ProbeModel, seeds: list[int], params: backends.SamplingParams
) -> tuple[list[backends.Generation], list[dict | None]]:
    """One tool-use episode per seed: a Generation summary and a transcript (None or {} when none ran) each.

    A worker that cannot give the world (WorldMissing) leaves every sample waiting, no attempt counted as the
    world's; a world that failed an episode (WorldFailed) is that sample's stored outcome (kind "world"); a
    remote server that could not be had (RemoteUnavailable) is an infrastructure failure, asked for again."""
    task = world_task(version)
    provider = provider_for(task)
    if provider is None:
        raise ValueError(f"task version {version.pk} is not a tool-use task: no world provider claims it")
    limits = EpisodeLimits(
        max_turns=getattr(settings, "PASSBAND_EPISODE_MAX_TURNS", 6),
        max_completion_tokens=4 * params.max_new_tokens,
    )
    try:
        worlds = provider.prepare(task, world_options(tool_seconds=limits.tool_seconds))
    except WorldMissing as error:
        # This worker lacks the world (a plug-in installed elsewhere, a snapshot it cannot read): the samples
        # wait, like for a server that is down, and the campaign page shows why; no attempt is counted.
        logger.error("task version %s: %s", version.pk, error)
        failure = f"on this worker: {error}"
        episode_health_record(
            environment=version.task.environment,
            world=error.world,
            attempts=[EpisodeAttempt(failure=failure)] * len(seeds),
        )
        return [backends.Generation.failed(seed=seed, error=failure) for seed in seeds], [{} for _ in seeds]
    backend = backend_for_probe_model(probe_model)
    outcomes = [
        _episode(worlds=worlds, task=task, backend=backend, seed=seed, params=params, limits=limits) for seed in seeds
    ]
    episode_health_record(
        environment=version.task.environment, world=worlds.name, attempts=[attempt for _, _, attempt in outcomes]
    )
    return [generation for generation, _, _ in outcomes], [transcript for _, transcript, _ in outcomes]


def _episode(
    *,
    worlds: TaskWorlds,
    task: WorldTask,
    backend: backends.Backend,
    seed: int,
    params: backends.SamplingParams,
    limits: EpisodeLimits,
) -> Outcome:
    """One episode in its own world, and what became of it."""
    server = task.server
    try:
        with worlds.episode(seed=seed) as opened:
            episode = run_episode(
                backend=backend,
                messages=opened.messages,
                tools=opened.tools,
                environment=opened.environment,
                world_seed=opened.world_seed,
                seed=seed,
                params=params,
                limits=limits,
                world=opened.world,
            )
    except WorldFailed as failure:
        # The world's failure after a bounded retry, not the model's: the task's outcome (stored).
        return (
            backends.Generation.failed(seed=seed, error=str(failure), kind="world"),
            None,
            EpisodeAttempt(failure=str(failure)),
        )
    except RemoteUnavailable as failure:
        if server is not None:
            metrics.mcp_failure(server=server.name, protocol=server.protocol, reason=failure.reason)
        generation = backends.Generation.failed(seed=seed, error=str(failure), kind="infrastructure")
        return generation, None, EpisodeAttempt(failure=str(failure))
    if server is not None:
        metrics.mcp_session(server=server.name, protocol=server.protocol)
    return episode.generation, episode.transcript, EpisodeAttempt(transcript=episode.transcript)
