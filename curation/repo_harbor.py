"""Export an environment's tasks as Harbor task folders, each written by its verifier kind's declared export
(repository tasks: engine/repo_tasks/harbor.py; code tasks: engine/integrations/harbor_code.py), and import
repository task folders back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser

from curation import imports, repo_uploads
from curation.models import Environment, TaskVersion
from curation.repo_snapshots import snapshot_read
from engine.harbor_tasks import task_toml_with_metadata
from engine.quality_card import card_text
from engine.repo_tasks import snapshots
from engine.repo_tasks.harbor import HarborFolderError, task_from_harbor_folder
from engine.task_format import LineProblem
from engine.verifiers.kind import HarborTask
from engine.verifiers.registry import kind_named


class ExportRefused(ValueError):
    """Tasks whose verifier kind declares no way to be exported (or is not installed here): nothing was written.
    The message names each task and its kind."""


def harbor_export(
    *, environment: Environment, out_dir: Path, card_of: Callable[[TaskVersion], dict] | None = None
) -> list[str]:
    """Write ``<out_dir>/<task key>/`` for every task (its current version) whose verifier kind declares a
    Harbor folder (``exports.harbor``: repository and code tasks, or an installed kind's); returns the keys
    written. Tasks of kinds that declare exports without a Harbor folder are left out. Raises ExportRefused,
    before writing anything, when a task's kind declares no exports at all or is not registered here.
    `card_of` gives a version's quality card (releases.quality_cards, which this app cannot import), written
    as JSON text to task.toml's ``[metadata] quality_card``."""
    versions = [
        version
        for version in TaskVersion.objects.filter(task__environment=environment)
        .select_related("task")
        .order_by("task__key")
        if version.task.current_version_id == version.pk
    ]
    kinds = {version.pk: kind_named((version.verifier or {}).get("kind")) for version in versions}
    refused = [
        f"{version.task.key}: verifier kind {(version.verifier or {}).get('kind')!r} "
        + ("is not installed here" if kinds[version.pk] is None else "declares no exports")
        for version in versions
        if kinds[version.pk] is None or kinds[version.pk].exports is None
    ]
    if refused:
        raise ExportRefused("; ".join(refused))
    written = []
    for version in versions:
        kind = kinds[version.pk]
        if kind.exports.harbor is None:
            continue
        files = kind.exports.harbor(
            HarborTask(
                key=version.task.key,
                prompt=_prompt_text(version.prompt),
                answer=version.answer or "",
                raw_config=version.verifier,
                config=kind.parse_config(version.verifier),
                read_snapshot=snapshot_read,
            )
        )
        if card_of is not None:
            card = {"quality_card": card_text(card_of(version))}
            files["task.toml"] = task_toml_with_metadata(files["task.toml"], card)
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


def _folder_files(folder: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            raise HarborFolderError(f"{folder.name}/{relative}: a symbolic link (a task folder holds plain files)")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[relative] = path.read_bytes()
    return files


def harbor_import(*, environment: Environment, owner: AbstractBaseUser, root: Path) -> imports.ImportReport:
    """Import Harbor task folders (``root`` itself, or each folder under it holding a ``task.toml``) in the
    layout ``harbor_export`` writes: each becomes a repository task whose snapshot is its ``environment/repo/``.
    All or nothing, with the audits, as an upload of snapshots with their rows (curation/repo_uploads.py);
    raises ImportRejected naming each folder's file and field."""
    folders = [root] if (root / "task.toml").is_file() else sorted(p.parent for p in root.glob("*/task.toml"))
    rows, uploads, problems = [], [], []
    for folder in folders:
        try:
            row, repository = task_from_harbor_folder(_folder_files(folder), folder=folder.name)
            data = snapshots.build_from_files(repository)
        except (HarborFolderError, snapshots.SnapshotError) as error:
            problems.append(LineProblem(folder.name, 0, "", str(error).removeprefix(f"{folder.name}/")))
            continue
        name = f"{folder.name}.tar.gz"
        rows.append({**row, "verifier": {**row["verifier"], "snapshot": name}})
        uploads.append(repo_uploads.SnapshotUpload(filename=name, data=data))
    tasks_filename = f"{root.name}.jsonl"
    if not folders:
        problems.append(LineProblem(root.name, 0, "", "no Harbor task folder (a folder with a task.toml) here"))
    if problems:
        raise imports.ImportRejected(imports.ImportReport(filename=tasks_filename, problems=problems))
    return repo_uploads.repo_upload(
        environment=environment,
        owner=owner,
        tasks_filename=tasks_filename,
        tasks_data="".join(json.dumps(row) + "\n" for row in rows).encode(),
        snapshot_uploads=uploads,
    )
