"""MCP environment benchmark: tool calls/s through Passband's MCP world against the SDK client called directly.

One server process (tests/support/mcp_kv_server.py, the SDK's MCPServer over streamable HTTP on
127.0.0.1), the same calls (`put` then `get` of a key, alternating): first the SDK's ClientSession
in one asyncio loop, then `McpWorld.call` from synchronous code (what an episode does: a blocking
portal per session, one call at a time), then whole sessions (open, list and convert the tools,
one call, the reward tool, close) per second both ways: the cost of one session per rollout.

    .venv/bin/python bench/mcp_environment.py --calls 2000 --sessions 100 --rounds 3

Goal: Passband's world within 80% of the direct client's calls/s (the portal and the observation
bookkeeping are never the bottleneck; the server is).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.episodes.remote_mcp import McpServerConfig, McpWorld  # noqa: E402
from tests.support.mcp_kv_server import serve_mcp_kv  # noqa: E402
from tests.support.outbound import TEST_ALLOWED_HOSTS  # noqa: E402,F401 - allows 127.0.0.1, the benchmark\'s own server


def call_arguments(index: int) -> tuple[str, dict]:
    if index % 2 == 0:
        return "put", {"key": f"k{index % 16}", "value": str(index)}
    return "get", {"key": f"k{(index - 1) % 16}"}


async def _direct_calls(url: str, calls: int) -> float:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        started = time.perf_counter()
        for index in range(calls):
            name, arguments = call_arguments(index)
            result = await session.call_tool(name, arguments)
            assert not result.is_error, result
        return calls / (time.perf_counter() - started)


def passband_calls(url: str, calls: int) -> float:
    with McpWorld(config=McpServerConfig(name="bench", url=url)) as world:
        started = time.perf_counter()
        for index in range(calls):
            name, arguments = call_arguments(index)
            result = world.call(name, arguments)
            assert result.status == "ok", result
        return calls / (time.perf_counter() - started)


async def _direct_sessions(url: str, sessions: int) -> float:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    started = time.perf_counter()
    for _ in range(sessions):
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            await session.call_tool("put", {"key": "a", "value": "1"})
            await session.call_tool("grade", {"key": "a", "expect": "1"})
    return sessions / (time.perf_counter() - started)


def passband_sessions(url: str, sessions: int) -> float:
    config = McpServerConfig(name="bench", url=url)
    started = time.perf_counter()
    for _ in range(sessions):
        with McpWorld(config=config, reward_arguments={"key": "a", "expect": "1"}) as world:
            world.call("put", {"key": "a", "value": "1"})
            assert world.state()["environment_reward"][0]["reward"] == 1.0
    return sessions / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="Tool calls per round, in one session.")
    parser.add_argument("--sessions", type=int, default=100, help="Whole sessions per round.")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    rows: dict[str, list[float]] = {
        "direct calls": [],
        "passband calls": [],
        "direct sessions": [],
        "passband sessions": [],
    }
    with serve_mcp_kv() as url:
        passband_calls(url, 50)  # warm both sides once
        for round_index in range(arguments.rounds):
            # Alternate the order so neither side always runs on a warmer server.
            first_direct = round_index % 2 == 0
            for side in ("direct", "passband") if first_direct else ("passband", "direct"):
                if side == "direct":
                    rows["direct calls"].append(asyncio.run(_direct_calls(url, arguments.calls)))
                    rows["direct sessions"].append(asyncio.run(_direct_sessions(url, arguments.sessions)))
                else:
                    rows["passband calls"].append(passband_calls(url, arguments.calls))
                    rows["passband sessions"].append(passband_sessions(url, arguments.sessions))
    print(f"{arguments.calls} calls and {arguments.sessions} sessions per round, {arguments.rounds} rounds")
    for name, values in rows.items():
        unit = "calls/s" if "calls" in name else "sessions/s"
        print(
            f"{name:18} median {statistics.median(values):8.1f} {unit}  (rounds: {', '.join(f'{v:.1f}' for v in values)})"
        )
    for what in ("calls", "sessions"):
        ratio = statistics.median(rows[f"passband {what}"]) / statistics.median(rows[f"direct {what}"])
        print(f"passband / direct {what}: {ratio:.1%}")


if __name__ == "__main__":
    main()
