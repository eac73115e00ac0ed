"""OpenEnv environment benchmark: steps/s and episodes/s through Passband's OpenEnv world against
openenv-core's own client called directly, on the same server in the same run.

One server process: the environment `openenv init` generates (openenv-core's template, adapted as a
user would: tests/support/openenv_template_server.py), served by uvicorn on 127.0.0.1. The same work
both ways:

* steps: one session, reset with a seed, then N steps (wrong words, so the episode never ends);
  directly with openenv's `GenericEnvClient` in one asyncio loop, then with `OpenEnvWorld.call`
  from synchronous code (what an episode does: argument validation against the action's schema,
  one step, the observation as the model's tool result, the rewards kept);
* episodes: whole sessions (open, reset with a seed, one step that ends it, the state, close);
  Passband's world also reads /schema and turns the action into the `step` tool each time, as
  every rollout does.

    .venv/bin/python bench/openenv_environment.py --steps 2000 --episodes 200 --rounds 3

Overhead per tool call: 1/(Passband's steps/s) - 1/(direct steps/s).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.episodes.remote_openenv import OpenEnvServerConfig, OpenEnvWorld  # noqa: E402
from tests.support.openenv_template_server import serve_openenv_template, word_for  # noqa: E402
from tests.support.outbound import TEST_ALLOWED_HOSTS  # noqa: E402,F401 - allows 127.0.0.1, the benchmark\'s own server

SEED = 5


async def _direct_steps(url: str, steps: int) -> float:
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url) as env:
        await env.reset(seed=SEED)
        started = time.perf_counter()
        for index in range(steps):
            result = await env.step({"message": f"w{index % 16}"})
            assert not result.done, result
        return steps / (time.perf_counter() - started)


def passband_steps(url: str, steps: int) -> float:
    with OpenEnvWorld(config=OpenEnvServerConfig(name="bench", url=url), seed=SEED) as world:
        started = time.perf_counter()
        for index in range(steps):
            result = world.call("step", {"message": f"w{index % 16}"})
            assert result.status == "ok" and not world.done, result
        return steps / (time.perf_counter() - started)


async def _direct_episodes(url: str, episodes: int) -> float:
    from openenv.core.generic_client import GenericEnvClient

    word = word_for(SEED)
    started = time.perf_counter()
    for _ in range(episodes):
        async with GenericEnvClient(base_url=url) as env:
            await env.reset(seed=SEED)
            result = await env.step({"message": word})
            assert result.done and result.reward == 1.0, result
            await env.state()
    return episodes / (time.perf_counter() - started)


def passband_episodes(url: str, episodes: int) -> float:
    config = OpenEnvServerConfig(name="bench", url=url)
    word = word_for(SEED)
    started = time.perf_counter()
    for _ in range(episodes):
        with OpenEnvWorld(config=config, seed=SEED) as world:
            world.call("step", {"message": word})
            assert world.state()["environment_reward"][0]["reward"] == 1.0
    return episodes / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="Steps per round, in one session.")
    parser.add_argument("--episodes", type=int, default=200, help="Whole episodes per round.")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    rows: dict[str, list[float]] = {
        "direct steps": [],
        "passband steps": [],
        "direct episodes": [],
        "passband episodes": [],
    }
    with tempfile.TemporaryDirectory() as directory, serve_openenv_template(Path(directory)) as url:
        passband_steps(url, 50)  # warm both sides once
        asyncio.run(_direct_steps(url, 50))
        for round_index in range(arguments.rounds):
            # Alternate the order so neither side always runs on a warmer server.
            for side in ("direct", "passband") if round_index % 2 == 0 else ("passband", "direct"):
                if side == "direct":
                    rows["direct steps"].append(asyncio.run(_direct_steps(url, arguments.steps)))
                    rows["direct episodes"].append(asyncio.run(_direct_episodes(url, arguments.episodes)))
                else:
                    rows["passband steps"].append(passband_steps(url, arguments.steps))
                    rows["passband episodes"].append(passband_episodes(url, arguments.episodes))
    print(f"{arguments.steps} steps and {arguments.episodes} episodes per round, {arguments.rounds} rounds")
    for name, values in rows.items():
        unit = "steps/s" if "steps" in name else "episodes/s"
        rounds = ", ".join(f"{value:.1f}" for value in values)
        print(f"{name:18} median {statistics.median(values):8.1f} {unit}  (rounds: {rounds})")
    for what in ("steps", "episodes"):
        passband, direct = statistics.median(rows[f"passband {what}"]), statistics.median(rows[f"direct {what}"])
        print(f"passband / direct {what}: {passband / direct:.1%}")
        unit = "tool call" if what == "steps" else "episode"
        print(f"  Passband's overhead per {unit}: {(1 / passband - 1 / direct) * 1e6:+.0f} us")


if __name__ == "__main__":
    main()
