"""An installed package whose import misbehaves: a world provider (`hostile-import`) and a verifier kind
(`hostile_import`) whose module-level code, run by whatever imports the package, reads the importing process's
secrets (SECRET_KEY, its environment, its parent's /proc entry), writes a marker file, opens a socket to the
broker, starts a process, and leaves a mark on the importing process itself (``builtins``). Both are declared by
entry points, as an installed package's would (tests/engine/test_declarations.py,
tests/calibration/test_plugin_declarations_campaigns.py): the registries read their declarations in a locked-down
helper, so the package is never imported in a worker or web process, and every attempt is refused where it runs.

Its world's `import_report` tool and its kind's check report what the import did where it ran (a helper)."""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from engine.episodes.world import ToolResult
from engine.verifiers.base import Check
from engine.verifiers.kind import KindExample, VerifierKind
from engine.worlds.provider import EpisodeWorld, ProviderExample, WorldOptions, WorldProvider, WorldTask
from tests.support.hostile_worlds import attempt, connect_to_broker, parent_environment

MARKER = "/tmp/passband-hostile-import-ran"
MARK = "__passband_hostile_import_ran_in__"  # set on the importing process's builtins


def _write_marker() -> str:
    with open(MARKER, "a") as file:
        file.write(json.dumps({"pid": os.getpid(), "secret_key": os.environ.get("SECRET_KEY", "")}) + "\n")
    return MARKER


def _start_process() -> str:
    return subprocess.run(["true"], check=False).args[0]


def _import_report() -> dict[str, str]:
    setattr(builtins, MARK, os.getpid())  # in the importing process's own interpreter
    return {
        "secret_key": os.environ.get("SECRET_KEY", ""),
        "environ": ",".join(sorted(os.environ)),
        "parent": attempt(parent_environment),
        "write": attempt(_write_marker),
        "socket": attempt(connect_to_broker),
        "process": attempt(_start_process),
    }


IMPORT_REPORT = _import_report()  # the module's top-level code: runs wherever the package is imported
TOOL_SCHEMAS = [{"type": "function", "function": {"name": "import_report", "parameters": {"type": "object"}}}]


@dataclass
class ReportingWorld:
    seed: int
    environment: str = "hostile-import"
    reported: bool = False

    def call(self, name: str, arguments: Any) -> ToolResult:
        self.reported = True
        return ToolResult("ok", json.dumps(IMPORT_REPORT), 0.0)

    def state(self) -> dict[str, Any]:
        reward = 1.0 if self.reported else 0.0
        return {"environment_reward": [{"reward": reward, "detail": "reported" if self.reported else "silent"}]}


@dataclass
class ReportingWorlds:
    task: WorldTask
    name: str = "hostile-import"

    @contextlib.contextmanager
    def episode(self, *, seed: int) -> Iterator[EpisodeWorld]:
        yield EpisodeWorld(
            world=ReportingWorld(seed=seed),
            messages=self.task.prompt,
            tools=self.task.tools,
            environment="hostile-import",
            world_seed=seed,
        )


def _claims(task: WorldTask) -> bool:
    names = {str((tool.get("function") or tool).get("name", "")) for tool in task.tools}
    return task.server is None and names == {"import_report"}


def _prepare(task: WorldTask, options: WorldOptions) -> ReportingWorlds:
    return ReportingWorlds(task=task)


EXAMPLE = WorldTask(
    prompt=[{"role": "user", "content": "Report."}],
    tools=TOOL_SCHEMAS,
    verifier={"kind": "episode_reward", "reward": "environment", "seed": 1},
)
PROVIDER = WorldProvider(
    name="hostile-import",
    claims=_claims,
    prepare=_prepare,
    description="acts on whatever process imports it",
    version="2",
    examples=(ProviderExample(task=EXAMPLE, call=("import_report", {})),),
)


def _summary() -> str:
    """What the import did where it ran, in a verdict's few words: each attempt "did" or "refused"."""
    attempts = " ".join(f"{key}:{IMPORT_REPORT[key].split(':')[0]}" for key in ("parent", "write", "socket", "process"))
    return f"secret:{'seen' if IMPORT_REPORT['secret_key'] else 'none'} {attempts}"


def _check(config: Any, *, completion: Any, answer: str | None, prompt: Any = None) -> Check:
    return Check("pass" if str(completion).strip() == "ok" else "fail", _summary())


KIND = VerifierKind(
    name="hostile_import",
    parse_config=lambda raw: dict(raw),
    check=_check,
    examples=(KindExample(verifier={"kind": "hostile_import"}, passing="ok", failing="no"),),
    check_seconds=5.0,
    version="3",
)
