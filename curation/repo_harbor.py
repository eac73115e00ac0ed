"""Export an environment's repository tasks as Harbor task folders (engine/repo_tasks/harbor.py)."""

from __future__ import annotations

from pathlib import Path

from curation.models import Environment, TaskVersion
from curation.repo_snapshots import snapshot_read
from engine.repo_tasks import snapshots
from engine.repo_tasks.harbor import harbor_folder
from engine.verifiers.kinds import repo_tests


def harbor_export(*, environment: Environment, out_dir: Path) -> list[str]:
    """Write ``<out_dir>/<task key>/`` for every repository task of the environment (its current
    version); returns the keys written. Other kinds of task are left out."""
    versions = TaskVersion.objects.filter(task__environment=environment, verifier__kind=repo_tests.KIND)
    written = []
    for version in versions.select_related("task").order_by("task__key"):
        if version.task.current_version_id != version.pk:
            continue
        spec = repo_tests.parse_config(version.verifier)
        files = harbor_folder(
            key=version.task.key,
            prompt=_prompt_text(version.prompt),
            answer=version.answer or "",
            spec=spec,
            snapshot_files=snapshots.read_files(snapshot_read(spec.snapshot)),
        )
        folder = out_dir / version.task.key
        for path, data in files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if path.endswith(".sh"):
                target.chmod(0o755)
        written.append(version.task.key)
    return written


def _prompt_text(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(str(message.get("content", "")) for message in prompt or [] if message.get("role") != "system")
