"""The Harbor folder's stand-in for ``engine.sandbox``: the grading runner as a plain child process.

Harbor runs the agent and the verifier in one container, so there is no sandbox to give the runner:
it runs with the container's Python, in a fresh folder, under the verifier's own time limit. The
grading inside it (fresh copy, git's reading of the patch, the pristine configuration, the hidden
tests compiled by the grader, the guard, the canaries, the evidence) is Passband's, unchanged.
"""

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from engine.sandbox.limits import SandboxLimits, SandboxMaxima  # noqa: F401 - what grading.py imports


@dataclass
class SandboxRun:
    status: str
    stdout: str = ""
    stderr: str = ""
    error: str = ""
    timeout_reason: str = ""


class Sandbox:
    python = sys.executable
    maxima = SandboxMaxima(wall_seconds=3600.0, cpu_seconds=3600.0)

    def run_script(self, *, program, stdin, limits):
        with tempfile.TemporaryDirectory() as folder:
            script = os.path.join(folder, "runner.py")
            with open(script, "w", encoding="utf-8") as handle:
                handle.write(program)
            work = os.path.join(folder, "work")
            os.makedirs(work)
            try:
                done = subprocess.run(
                    [sys.executable, "-I", script],
                    input=stdin,
                    capture_output=True,
                    text=True,
                    cwd=work,
                    timeout=limits.wall_seconds,
                )
            except subprocess.TimeoutExpired:
                return SandboxRun("timeout", timeout_reason="wall")
            except OSError as error:
                return SandboxRun("error", error=str(error))
        return SandboxRun("exited", stdout=done.stdout, stderr=done.stderr)


def default_sandbox():
    return Sandbox()
