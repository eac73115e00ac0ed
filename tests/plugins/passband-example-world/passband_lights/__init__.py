"""The `lights` world provider: a row of lamps, some on (chosen by the task's seed); every lamp on is a reward
of 1. One world object per episode, in a helper process of its own, as every installed provider's
(engine/worlds/isolated.py)."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.episodes.world import ToolResult
from engine.worlds.provider import EpisodeWorld, ProviderExample, WorldOptions, WorldProvider, WorldTask

LAMPS = 5
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "lights_look",
            "description": "Which lamps are on: a list of true/false, lamp 0 first.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lights_toggle",
            "description": "Switch one lamp (on becomes off, off becomes on).",
            "parameters": {
                "type": "object",
                "properties": {"lamp": {"type": "integer", "minimum": 0, "maximum": LAMPS - 1}},
                "required": ["lamp"],
            },
        },
    },
]
TOOL_NAMES = frozenset(schema["function"]["name"] for schema in TOOL_SCHEMAS)


def initial_lamps(seed: int) -> list[bool]:
    """The lamps a world of `seed` starts with (at least one off)."""
    lamps = [random.Random(seed).random() < 0.5 for _ in range(LAMPS)]
    lamps[seed % LAMPS] = False
    return lamps


@dataclass
class LightsWorld:
    """One episode's lamps (the ``World`` protocol: environment, seed, call, state)."""

    seed: int
    environment: str = "lights"
    lamps: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lamps = initial_lamps(self.seed)

    def call(self, name: str, arguments: Any) -> ToolResult:
        started = time.perf_counter()
        if name == "lights_look":
            return ToolResult("ok", json.dumps({"lamps": self.lamps}), (time.perf_counter() - started) * 1000)
        lamp = arguments.get("lamp") if isinstance(arguments, dict) else None
        if name != "lights_toggle":
            return ToolResult("unknown_tool", json.dumps({"error": f"no tool {name!r}"}), 0.0)
        if isinstance(lamp, bool) or not isinstance(lamp, int) or not 0 <= lamp < LAMPS:
            return ToolResult("bad_arguments", json.dumps({"error": f"lamp must be 0 to {LAMPS - 1}"}), 0.0)
        self.lamps[lamp] = not self.lamps[lamp]
        return ToolResult(
            "ok", json.dumps({"lamp": lamp, "on": self.lamps[lamp]}), (time.perf_counter() - started) * 1000
        )

    def state(self) -> dict[str, Any]:
        reward = 1.0 if all(self.lamps) else 0.0
        return {
            "lamps": list(self.lamps),
            "environment_reward": [{"reward": reward, "detail": f"{sum(self.lamps)} on"}],
        }


@dataclass
class LightsWorlds:
    """A task's lamps: every episode starts from the task's seed."""

    task: WorldTask
    name: str = "lights"

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        world_seed = int(self.task.verifier.get("seed") or 0)
        yield EpisodeWorld(
            world=LightsWorld(seed=world_seed),
            messages=self.task.prompt,
            tools=self.task.tools,
            environment="lights",
            world_seed=world_seed,
        )


def claims(task: WorldTask) -> bool:
    """A task, not on a remote server, judged by the world's reward, whose tools are the lights tools."""
    names = {str((tool.get("function") or tool).get("name", "")) for tool in task.tools}
    return task.server is None and task.verifier.get("kind") == "episode_reward" and bool(names) and names <= TOOL_NAMES


def prepare(task: WorldTask, options: WorldOptions) -> LightsWorlds:
    return LightsWorlds(task=task)


def task(key: str, *, seed: int) -> dict[str, Any]:
    """A lights task in Passband's import format; its answer is the toggles that switch every lamp on."""
    toggles = [
        {"name": "lights_toggle", "arguments": {"lamp": index}}
        for index, on in enumerate(initial_lamps(seed))
        if not on
    ]
    return {
        "key": key,
        "prompt": [{"role": "user", "content": f"[{key}] Switch every lamp on, then say done."}],
        "answer": json.dumps(toggles),
        "tools": TOOL_SCHEMAS,
        "verifier": {"kind": "episode_reward", "reward": "environment", "seed": seed},
    }


PROVIDER = WorldProvider(
    name="lights",
    claims=claims,
    prepare=prepare,
    description="a row of lamps chosen by the task's seed; the reward is 1 when every lamp is on",
    examples=(
        ProviderExample(
            task=WorldTask(
                prompt=[{"role": "user", "content": "Switch every lamp on."}],
                tools=TOOL_SCHEMAS,
                verifier={"kind": "episode_reward", "reward": "environment", "seed": 3},
            ),
            call=("lights_toggle", {"lamp": 0}),
        ),
    ),
)
