"""Git bundles as snapshots: read in the sandbox (``bundle_program.py``), never by git on the server.

    >>> data = snapshot_from_bundle(upload_bytes, filename="calc.bundle")   # a deterministic tar.gz

The whole reading (the header check, ``git init``/``verify``/``fetch``, listing and archiving the tree)
runs in a sandbox whose view holds the standard library, git and nothing of the server; the files that
come back are checked again (``snapshots.read_files``) and built the same deterministic way as every
snapshot, so a bundle and a tar.gz of the same files are the same snapshot.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from engine.repo_tasks import snapshots
from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.view import SandboxView, sandbox_for

PROGRAM = Path(__file__).with_name("bundle_program.py").read_text(encoding="utf-8")
LIMITS = SandboxLimits(
    wall_seconds=60,
    cpu_seconds=60,
    memory_bytes=2 << 30,
    max_processes=16,
    max_open_files=256,
    max_file_bytes=64 << 20,
    tmp_bytes=256 << 20,
    max_output_bytes=16 << 20,
)


def snapshot_from_bundle(data: bytes, *, filename: str, sandbox: Sandbox | None = None) -> bytes:
    """The snapshot (tar.gz bytes) of the tree at the bundle's HEAD; SnapshotError names the file and what
    is wrong (the bundle's fault) or that bundles cannot be read here (the sandbox's)."""
    request = {
        "bundle": base64.b64encode(data).decode(),
        "max_files": snapshots.MAX_SNAPSHOT_FILES,
        "max_bytes": snapshots.MAX_UNPACKED_BYTES,
    }
    run = (sandbox or sandbox_for(SandboxView.of())).run_script(
        program=PROGRAM, stdin=json.dumps(request), limits=LIMITS
    )
    try:
        reply = json.loads(run.stdout.strip().splitlines()[-1]) if run.status == "exited" else {}
    except (ValueError, IndexError):
        reply = {}
    if "error" in reply:
        raise snapshots.SnapshotError(f"{filename}: not a git bundle Passband reads: {reply['error']}")
    if "archive" not in reply:
        reason = reply.get("infra_error") or run.error or f"the reading ended with {run.status}"
        if run.status == "timeout":
            reason = f"reading it took longer than {LIMITS.wall_seconds:g} s"
        raise snapshots.SnapshotError(
            f"{filename}: the bundle could not be read in the sandbox ({str(reason)[:300]}); "
            "upload a .tar.gz of the work tree instead"
        )
    files = snapshots.read_files(base64.b64decode(reply["archive"]))
    return snapshots.build_from_files(files)
