"""A small MCP tool server built on the official SDK (not Passband's code), for tests and benchmarks.

A key-value store and a calculator, one store per MCP session (keyed by the session id the
streamable HTTP transport gives each client), so two rollouts never see each other's keys:

* `add(a, b)`: a + b;   `multiply(a, b)`: a * b;
* `put(key, value)`: stores a string;   `get(key)`: reads it back (an error when it is missing);
* `grade(key, expect)`: the environment's reward (Passband's convention, docs/environments.md):
  {"reward": 1.0, ...} when the session's store holds `expect` under `key`, else 0.0.

    python tests/support/mcp_kv_server.py --port 8765            # streamable HTTP on /mcp
    python tests/support/mcp_kv_server.py --stdio                # the same tools over stdio
    python tests/support/mcp_kv_server.py --port 8765 --bad-schema   # one tool's inputSchema is invalid
    python tests/support/mcp_kv_server.py --port 8765 --slow-tool    # adds wait(seconds), a tool that hangs
    python tests/support/mcp_kv_server.py --port 8765 --renamed-argument  # put(key, text): a new release

`serve_mcp_kv()` starts it as a real process on a free port and yields its URL.
"""

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer


def build_server(*, bad_schema: bool = False, slow_tool: bool = False, renamed_argument: bool = False) -> MCPServer:
    server = MCPServer("passband-test-kv")
    stores: dict[str, dict[str, str]] = {}

    def store(context: Context) -> dict[str, str]:
        # The streamable HTTP transport names each session in this header; stdio has one session.
        session_id = (context.headers or {}).get("mcp-session-id") or "stdio"
        return stores.setdefault(session_id, {})

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    if renamed_argument:

        @server.tool(name="put")
        def put_text(key: str, text: str, context: Context) -> str:
            """Store a string under a key (a release that renamed `value` to `text`)."""
            store(context)[key] = text
            return f"stored {key}"

    else:

        @server.tool()
        def put(key: str, value: str, context: Context) -> str:
            """Store a string value under a key."""
            store(context)[key] = value
            return f"stored {key}"

    @server.tool()
    def get(key: str, context: Context) -> str:
        """Read the value stored under a key."""
        values = store(context)
        if key not in values:
            raise ValueError(f"no value under {key!r}")
        return values[key]

    @server.tool()
    def grade(key: str, expect: str, context: Context) -> dict[str, Any]:
        """The environment's reward: 1.0 when the store holds `expect` under `key`."""
        value = store(context).get(key)
        ok = value is not None and value.strip() == expect.strip()
        return {"reward": 1.0 if ok else 0.0, "detail": f"{key}={value!r}, expected {expect!r}"}

    if slow_tool:

        @server.tool()
        async def wait(seconds: float) -> str:
            """Answer after `seconds` (a tool that hangs, for timeouts)."""
            await anyio.sleep(seconds)
            return "waited"

    if bad_schema:

        @server.tool()
        def broken(x: int) -> int:
            """A tool whose inputSchema is not a valid JSON Schema."""
            return x

        server._tool_manager.get_tool("broken").parameters = {
            "type": "object",
            "properties": {"x": {"type": "integer-ish"}},
        }
    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_process(
    *,
    port: int | None = None,
    bad_schema: bool = False,
    slow_tool: bool = False,
    renamed_argument: bool = False,
    log_path: Path | None = None,
):
    """Start the server as its own process on 127.0.0.1; returns (process, url) once it answers."""
    port = port or free_port()
    command = [sys.executable, str(Path(__file__).resolve()), "--port", str(port)]
    if bad_schema:
        command.append("--bad-schema")
    if slow_tool:
        command.append("--slow-tool")
    if renamed_argument:
        command.append("--renamed-argument")
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP test server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return process, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.05)
    stop_process(process)
    raise RuntimeError("the MCP test server did not start listening within 30 s")


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def serve_mcp_kv(**options: Any) -> Iterator[str]:
    """Run the server as a real process for the block; yields its streamable HTTP URL (".../mcp")."""
    process, url = start_process(**options)
    try:
        yield url
    finally:
        stop_process(process)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--bad-schema", action="store_true")
    parser.add_argument("--slow-tool", action="store_true")
    parser.add_argument("--renamed-argument", action="store_true")
    arguments = parser.parse_args()
    mcp_server = build_server(
        bad_schema=arguments.bad_schema, slow_tool=arguments.slow_tool, renamed_argument=arguments.renamed_argument
    )
    if arguments.stdio:
        mcp_server.run("stdio")
    else:
        mcp_server.settings.log_level = "WARNING"
        mcp_server.run("streamable-http", host="127.0.0.1", port=arguments.port)
