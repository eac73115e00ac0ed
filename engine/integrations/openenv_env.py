"""A Passband release as an OpenEnv environment, so OpenEnv-speaking trainers train on it directly.

One episode is one task version, single-turn: `reset(seed=s)` picks task `s mod n` of the release
(without a seed, one at random; `task_id="<key>@<hash>"` or a bare key picks that task) and observes
its prompt and tools; `step(PassbandAction(completion=...))` scores the reply with the task's own
verifier and ends the episode. The reward is 1.0 or 0.0, and None when the verifier errored or timed
out: no evidence either way, so leave it out rather than train on it as a 0.

Serve a release (FastAPI app from OpenEnv's `create_app`; one environment per WebSocket session):

    python -m engine.integrations.openenv_env release-1-native.parquet --port 8000

and drive it with the typed client (or OpenEnv's GenericEnvClient, or verifiers' `openenv` taskset):

    async with PassbandEnvClient(base_url="http://127.0.0.1:8000") as env:
        result = await env.reset(seed=0)
        result = await env.step(PassbandAction(completion=policy(result.observation.prompt)))
        result.reward, result.observation.outcome      # 1.0 "pass"
"""

from __future__ import annotations

import argparse
import random
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from engine.integrations.release import ReleaseTask, read_release, score

__all__ = [
    "PassbandAction",
    "PassbandEnvClient",
    "PassbandEnvironment",
    "PassbandObservation",
    "PassbandState",
    "create_passband_app",
]


class PassbandAction(Action):
    completion: str | dict[str, Any] | list[dict[str, Any]]
    """The policy's reply: text, an assistant chat message, or a list of chat messages (tool calls included)."""


class PassbandObservation(Observation):
    task_id: str = ""
    """`<task key>@<version hash>` of the episode's task version."""
    prompt: list[dict[str, Any]] = Field(default_factory=list)
    """Chat messages to answer."""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """Chat Completions tool schemas the policy may call."""
    quality_card: dict[str, Any] | None = None
    """The task version's quality card (engine/quality_card.py): on reset, so a trainer can skip a task."""
    outcome: str | None = None
    """After the step: the verifier's `pass`, `fail`, `error` or `timeout`."""
    detail: str | None = None
    """After the step: the verifier's short reason."""


class PassbandState(State):
    task_id: str | None = None
    seed: int | None = None


class PassbandEnvironment(Environment[PassbandAction, PassbandObservation, PassbandState]):
    """Single-turn episodes over the task versions of a release."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # an instance holds only its own episode

    def __init__(self, tasks: Sequence[ReleaseTask]) -> None:
        super().__init__()
        if not tasks:
            raise ValueError("a Passband OpenEnv environment needs at least one task")
        self.tasks = list(tasks)
        self._by_id = {task.id: task for task in self.tasks} | {task.task_key: task for task in self.tasks}
        self._task: ReleaseTask | None = None
        self._state = PassbandState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **kwargs: Any
    ) -> PassbandObservation:
        """Start an episode on task `seed mod n`, the task `task_id` names, or a random one."""
        if task_id is not None:
            if task_id not in self._by_id:
                raise KeyError(f"task_id {task_id!r} is not in this release")
            task = self._by_id[task_id]
        elif seed is not None:
            task = self.tasks[seed % len(self.tasks)]
        else:
            task = random.choice(self.tasks)
        self._task = task
        self._state = PassbandState(episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=task.id, seed=seed)
        return PassbandObservation(
            task_id=task.id, prompt=task.prompt, tools=task.tools, quality_card=task.quality_card
        )

    def step(self, action: PassbandAction, timeout_s: float | None = None, **kwargs: Any) -> PassbandObservation:
        """Score the reply with the task's verifier; the episode ends whatever the outcome."""
        task = self._task
        if task is None or self._state.step_count:
            raise RuntimeError("reset() starts an episode; a Passband episode takes one step")
        verdict = score(task, completion=action.completion)
        self._state.step_count += 1
        return PassbandObservation(
            task_id=task.id,
            prompt=task.prompt,
            tools=task.tools,
            outcome=verdict.outcome,
            detail=verdict.detail,
            reward=verdict.reward,
            done=True,
            metadata={"latency_ms": verdict.latency_ms},
        )

    @property
    def state(self) -> PassbandState:
        return self._state


def create_passband_app(release: str | Path, *, max_concurrent_envs: int = 64):
    """OpenEnv's FastAPI app serving the tasks of a release file (any export format, .jsonl or .parquet)."""
    tasks = read_release(release)
    return create_app(
        lambda: PassbandEnvironment(tasks),
        PassbandAction,
        PassbandObservation,
        env_name="passband",
        max_concurrent_envs=max_concurrent_envs,
    )


class PassbandEnvClient(EnvClient[PassbandAction, PassbandObservation, PassbandState]):
    """OpenEnv's WebSocket client, typed for Passband's action, observation and state."""

    def _step_payload(self, action: PassbandAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[PassbandObservation]:
        observation = PassbandObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False)
        )
        return StepResult(observation=observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> PassbandState:
        return PassbandState(**payload)


def main(argv: Sequence[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve a Passband release as an OpenEnv environment.")
    parser.add_argument("release", help="a release file: any export format, .jsonl or .parquet")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-concurrent-envs", type=int, default=64)
    args = parser.parse_args(argv)
    uvicorn.run(
        create_passband_app(args.release, max_concurrent_envs=args.max_concurrent_envs), host=args.host, port=args.port
    )


if __name__ == "__main__":
    main()
