"""The episode world of a repository task: the rollout's own copy of the repository, and tools on it.

    world = RepoWorld(snapshot=data, limits=RepoWorldLimits())
    world.call("read_file", {"path": "inflection/__init__.py"})
    world.call("apply_diff", {"diff": "..."})
    world.state()     # {"patch": <the rollout's edits as a unified diff>, "files_changed": [...]}

The copy is held here as an *overlay*: the text of every file that differs from the snapshot (None
for a deleted file). Each tool call is one sandbox run (``world_program.py``) that unpacks a fresh
copy of the snapshot, lays the overlay over it, runs the tool, and sends back the overlay after the
call; nothing of a run survives it. So a reset is a fresh copy of the snapshot (an empty overlay),
two rollouts never share files, and a command the model runs (``run_command``, ``run_tests``) runs
in the sandbox like any model-written code: no network, rlimits, a private /tmp, an empty
environment. Per call: ``call_seconds`` of wall clock (the command inside gets a little less) and
the sandbox's memory and process limits; per episode: ``episode_seconds`` of tool time in all, and
``max_overlay_bytes`` of edited text. The verdict grades ``state()["patch"]`` exactly as a
single-turn answer: in a fresh copy, by ``grading.grade``.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.episodes.world import ToolResult
from engine.repo_tasks.patches import diff_files
from engine.repo_tasks.snapshots import read_files
from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.view import repository_view, sandbox_for

PROGRAM = Path(__file__).with_name("world_program.py").read_text(encoding="utf-8")
ENVIRONMENT = "repository"
MIN_CALL_SECONDS = 1.0  # less tool time than this left: the episode's budget is spent


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


_PATH = {"type": "string", "description": "a path relative to the repository root"}
TOOL_SCHEMAS = [
    _tool("list_files", "List the repository's files (under a folder).", {"path": _PATH}, []),
    _tool(
        "read_file",
        "Read a file, with line numbers.",
        {"path": _PATH, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}},
        ["path"],
    ),
    _tool(
        "search",
        "Search the files for a regular expression.",
        {"pattern": {"type": "string"}, "path": _PATH},
        ["pattern"],
    ),
    _tool("write_file", "Write a whole file.", {"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    _tool("apply_diff", "Apply a unified diff (git apply -p1).", {"diff": {"type": "string"}}, ["diff"]),
    _tool(
        "run_tests",
        "Run pytest on test paths or node ids (all tests when none).",
        {"paths": {"type": "array", "items": {"type": "string"}}},
        [],
    ),
    _tool("run_command", "Run a shell command in the repository.", {"command": {"type": "string"}}, ["command"]),
]
TOOL_NAMES = tuple(schema["function"]["name"] for schema in TOOL_SCHEMAS)


@dataclass(frozen=True)
class RepoWorldLimits:
    call_seconds: float = 30.0
    episode_seconds: float = 300.0
    memory_mb: int = 1024
    max_processes: int = 16
    max_overlay_bytes: int = 4 << 20
    output_chars: int = 8000


@dataclass
class RepoWorld:
    """One rollout's repository (see the module docstring). ``environment`` and ``seed`` make it an
    ``engine.episodes.world.World``; a repository world has no seed (every reset is the snapshot)."""

    snapshot: bytes
    limits: RepoWorldLimits = field(default_factory=RepoWorldLimits)
    sandbox: Sandbox | None = None
    environment: str = ENVIRONMENT
    seed: int = 0
    overlay: dict[str, str | None] = field(default_factory=dict)
    tool_seconds_used: float = 0.0
    dependencies: tuple[str, ...] = ()

    def _sandbox(self) -> Sandbox:
        # The view the grader's tests get: pytest and the declared dependencies, nothing of Passband's.
        return self.sandbox or sandbox_for(repository_view(self.dependencies))

    def reset(self) -> None:
        """A fresh copy of the snapshot."""
        self.overlay = {}
        self.tool_seconds_used = 0.0

    def call(self, name: str, arguments: Any) -> ToolResult:
        if name not in TOOL_NAMES:
            return ToolResult(
                "unknown_tool", json.dumps({"error": f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}"}), 0.0
            )
        remaining = self.limits.episode_seconds - self.tool_seconds_used
        if remaining < MIN_CALL_SECONDS:
            message = f"the episode's {self.limits.episode_seconds:g} s of tool time are spent"
            return ToolResult("timeout", json.dumps({"error": message}), 0.0)
        started = time.perf_counter()
        request = {
            "snapshot": base64.b64encode(self.snapshot).decode(),
            "overlay": self.overlay,
            "tool": name,
            "arguments": arguments,
            # The command inside stops first, so its output still comes back.
            "command_seconds": max(MIN_CALL_SECONDS / 2, min(self.limits.call_seconds, remaining) - 2.0),
            "output_chars": self.limits.output_chars,
            "python": os.path.realpath(self._sandbox().python),
        }
        seconds = min(self.limits.call_seconds, remaining)
        limits = SandboxLimits(
            wall_seconds=seconds,
            cpu_seconds=seconds,
            memory_bytes=self.limits.memory_mb << 20,
            max_processes=self.limits.max_processes,
            max_open_files=256,
            max_file_bytes=64 << 20,
            tmp_bytes=256 << 20,
            max_output_bytes=self.limits.max_overlay_bytes * 2 + 65536,
        )
        run = self._sandbox().run_script(program=PROGRAM, stdin=json.dumps(request), limits=limits)
        elapsed = time.perf_counter() - started
        self.tool_seconds_used += elapsed
        latency_ms = elapsed * 1000
        if run.status == "timeout":
            return ToolResult("timeout", json.dumps({"error": f"the tool ran past {seconds:g} s"}), latency_ms)
        try:
            reply = json.loads(run.stdout) if run.status == "exited" and run.exit_code == 0 else None
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            tail = (run.error or run.stderr.strip() or run.status)[-300:]
            return ToolResult("tool_error", json.dumps({"error": f"the tool failed: {tail}"}), latency_ms)
        overlay = reply.get("overlay") or {}
        if sum(len(text or "") for text in overlay.values()) > self.limits.max_overlay_bytes:
            message = f"edits over {self.limits.max_overlay_bytes} bytes: the call's changes were dropped"
            return ToolResult("tool_error", json.dumps({"error": message}), latency_ms)
        self.overlay = overlay
        return ToolResult(str(reply.get("status", "ok")), str(reply.get("content", "")), latency_ms)

    def state(self) -> dict[str, Any]:
        """The rollout's edits: the files changed and the unified diff that ``grade`` takes."""
        before: dict[str, str] = {}
        for path, data in read_files(self.snapshot).items():
            if path in self.overlay:
                try:
                    before[path] = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
        after = {path: text for path, text in self.overlay.items() if text is not None}
        after.update({path: text for path, text in before.items() if path not in self.overlay})
        return {"files_changed": sorted(self.overlay), "patch": diff_files(before, after)}
