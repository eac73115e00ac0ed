"""Limits of one sandbox run, and the maxima that clamp them.

A task (or a caller of the HTTP API, which may send any verifier config) asks for limits; the
process running the sandbox has maxima that no request can exceed. The maxima come from
``SandboxMaxima.from_environment()`` (``PASSBAND_SANDBOX_MAX_WALL_SECONDS``, ``..._CPU_SECONDS``,
``..._MEMORY_MB``, ``..._PROCESSES``, ``..._OUTPUT_BYTES``) unless a Sandbox is given its own,
and the fork server applies them again to every request it receives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run. Times in seconds, sizes in bytes."""

    wall_seconds: float = 10.0  # whole run, enforced by the setup process (the program killed)
    cpu_seconds: float = 10.0  # RLIMIT_CPU per process, rounded up to whole seconds
    memory_bytes: int = 1 << 30  # RLIMIT_AS per process
    max_processes: int = 4  # the program and its children and threads (RLIMIT_NPROC)
    max_open_files: int = 64  # RLIMIT_NOFILE
    max_file_bytes: int = 16 << 20  # RLIMIT_FSIZE: largest file the program may write
    tmp_bytes: int = 64 << 20  # size of the private /tmp (namespaces only)
    max_output_bytes: int = 1 << 20  # stdout (and stderr) beyond this ends the run

    def as_request(self) -> dict[str, float | int]:
        return {
            "wall_seconds": self.wall_seconds,
            "cpu_seconds": self.cpu_seconds,
            "memory_bytes": self.memory_bytes,
            "max_processes": self.max_processes,
            "max_open_files": self.max_open_files,
            "max_file_bytes": self.max_file_bytes,
            "tmp_bytes": self.tmp_bytes,
        }


@dataclass(frozen=True)
class SandboxMaxima:
    """The most any run may get, whatever it asks for."""

    wall_seconds: float = 60.0
    cpu_seconds: float = 60.0
    memory_bytes: int = 4 << 30
    max_processes: int = 16
    max_open_files: int = 256
    max_file_bytes: int = 64 << 20
    tmp_bytes: int = 256 << 20
    max_output_bytes: int = 16 << 20

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SandboxMaxima:
        """Defaults, lowered or raised by PASSBAND_SANDBOX_MAX_* variables (bad values are ignored)."""
        environ = os.environ if environ is None else environ
        maxima = cls()
        readers: dict[str, tuple[str, Callable[[str], Any]]] = {
            "PASSBAND_SANDBOX_MAX_WALL_SECONDS": ("wall_seconds", float),
            "PASSBAND_SANDBOX_MAX_CPU_SECONDS": ("cpu_seconds", float),
            "PASSBAND_SANDBOX_MAX_MEMORY_MB": ("memory_bytes", lambda text: int(text) << 20),
            "PASSBAND_SANDBOX_MAX_PROCESSES": ("max_processes", int),
            "PASSBAND_SANDBOX_MAX_OUTPUT_BYTES": ("max_output_bytes", int),
        }
        for variable, (name, parse) in readers.items():
            text = environ.get(variable, "").strip()
            if not text:
                continue
            try:
                value = parse(text)
            except ValueError:
                continue
            if value > 0:
                maxima = replace(maxima, **{name: value})
        return maxima

    def as_options(self) -> dict[str, float | int]:
        return {field.name: getattr(self, field.name) for field in fields(self) if field.name != "max_output_bytes"}

    def clamp(self, limits: SandboxLimits) -> SandboxLimits:
        """``limits`` with every value lowered to these maxima."""
        return replace(
            limits,
            **{field.name: min(getattr(limits, field.name), getattr(self, field.name)) for field in fields(self)},
        )
