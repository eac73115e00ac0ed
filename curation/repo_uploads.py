"""Repository snapshots uploaded with the task rows that use them (the upload page, the API, a background job).

An upload is a JSON Lines task file and one or more snapshots: a ``.tar.gz`` (``.tgz``) of the repository's
work tree, or a git ``.bundle`` (its HEAD's tree becomes the snapshot, built the same deterministic way as
every snapshot; the bundle is read in the sandbox, ``engine.repo_tasks.bundles``). A row's
``verifier.snapshot`` names its repository either by digest (``sha256:<hex>`` of a
snapshot uploaded now or stored before) or by the file name of a snapshot uploaded with it, which the
import replaces with that snapshot's digest: the digest stays in the verifier config, so the task version's
content hash covers the repository.

All or nothing. Every snapshot is checked (``engine.repo_tasks.snapshots.inspect``), every row's reference
resolved, and each uploaded snapshot must be named by a row, before anything is stored; then the snapshots
are stored by content hash and the rows imported with their audits, in one transaction. A repository task
whose audit fails (its tests need the network or a package the sandbox does not have, its reference patch
fixes nothing) refuses the whole upload with the audit's failing output, and the snapshots this upload
stored are removed again. Each problem names the file, the line and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser

from curation import imports, repo_snapshots
from curation.models import Environment, TaskVersion
from engine.repo_tasks import bundles, snapshots
from engine.task_format import LineProblem
from engine.verifiers.kinds import repo_tests

TARBALL_SUFFIXES = (".tar.gz", ".tgz")
BUNDLE_SUFFIX = ".bundle"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class SnapshotUpload:
    filename: str
    data: bytes


def snapshot_from_upload(upload: SnapshotUpload) -> bytes:
    """The snapshot (tar.gz bytes) an uploaded file gives; SnapshotError names the file."""
    name = upload.filename
    if name.endswith(BUNDLE_SUFFIX):
        return bundles.snapshot_from_bundle(upload.data, filename=name)
    if not name.endswith(TARBALL_SUFFIXES):
        raise snapshots.SnapshotError(f"{name}: a snapshot is a .tar.gz (or .tgz) of the work tree or a git .bundle")
    return upload.data


def _rejected(filename: str, problems: list[LineProblem]) -> imports.ImportRejected:
    return imports.ImportRejected(imports.ImportReport(filename=filename, problems=problems))


def _checked_snapshots(uploads: Sequence[SnapshotUpload], *, tasks_filename: str) -> dict[str, tuple[str, bytes]]:
    """``{file name: (digest, bytes)}`` of every uploaded snapshot, each checked; ImportRejected otherwise."""
    checked: dict[str, tuple[str, bytes]] = {}
    problems = []
    for upload in uploads:
        too_large = imports.upload_size_problem(filename=upload.filename, size=len(upload.data))
        try:
            if too_large is not None:
                raise snapshots.SnapshotError(too_large)
            data = snapshot_from_upload(upload)
            checked[upload.filename] = (snapshots.inspect(data).digest, data)
        except snapshots.SnapshotError as error:
            problems.append(LineProblem(upload.filename, 0, "", str(error).removeprefix(f"{upload.filename}: ")))
    if problems:
        raise _rejected(tasks_filename, problems)
    return checked


def _resolved_rows(
    text: str, *, filename: str, uploaded: dict[str, tuple[str, bytes]]
) -> tuple[bytes, list[LineProblem], set[str]]:
    """The task file with uploaded snapshots' file names replaced by their digests, the reference problems
    (naming line and field), and the digests the rows name."""
    digests_by_name = {name: digest for name, (digest, _) in uploaded.items()}
    uploaded_digests = set(digests_by_name.values())
    lines, problems, named = [], [], set()
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            row = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            row = None  # the import reports the line
        verifier = row.get("verifier") if isinstance(row, dict) else None
        if not isinstance(verifier, dict) or verifier.get("kind") != repo_tests.KIND:
            lines.append(line)
            continue
        reference = verifier.get("snapshot")
        digest = digests_by_name.get(reference, reference) if isinstance(reference, str) else reference
        if not isinstance(digest, str) or not (
            digest in uploaded_digests or (DIGEST.match(digest) and repo_snapshots.snapshot_exists(digest=digest))
        ):
            uploaded_names = ", ".join(sorted(digests_by_name)) or "none"
            problems.append(
                LineProblem(
                    filename,
                    number,
                    "verifier.snapshot",
                    f"{reference!r} is neither the name of a snapshot uploaded with this file ({uploaded_names}) "
                    "nor the digest of a stored one",
                )
            )
            lines.append(line)
            continue
        named.add(digest)
        lines.append(json.dumps({**row, "verifier": {**verifier, "snapshot": digest}}, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode(), problems, named


def repo_upload(
    *,
    environment: Environment,
    owner: AbstractBaseUser,
    tasks_filename: str,
    tasks_data: bytes,
    snapshot_uploads: Sequence[SnapshotUpload],
) -> imports.ImportReport:
    """Import task rows with the snapshots they use (the module's docstring); raises ImportRejected with
    every problem, having written nothing, or returns the import's report."""
    if not tasks_filename.endswith((".jsonl", ".ndjson", ".json")):
        raise _rejected(
            tasks_filename,
            [LineProblem(tasks_filename, 0, "", "tasks uploaded with snapshots come as JSON Lines (.jsonl)")],
        )
    uploaded = _checked_snapshots(snapshot_uploads, tasks_filename=tasks_filename)
    try:
        text = tasks_data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _rejected(tasks_filename, [LineProblem(tasks_filename, 0, "", f"not UTF-8 ({error})")]) from error
    resolved, problems, named = _resolved_rows(text, filename=tasks_filename, uploaded=uploaded)
    for name, (digest, _) in uploaded.items():
        if digest not in named:
            problems.append(LineProblem(name, 0, "", f"no task row names this snapshot ({digest}, or {name!r})"))
    if problems:
        raise _rejected(tasks_filename, problems)

    stored_now = []
    try:
        for digest, data in uploaded.values():
            if not repo_snapshots.snapshot_exists(digest=digest):
                repo_snapshots.snapshot_store(data=data)
                stored_now.append(digest)
        # A snapshot whose tests cannot run here is refused, with the output; the audits run before the write
        # transaction opens (the tests take seconds, and on SQLite a transaction holds the one write lock).
        report = imports.tasks_import(
            environment=environment,
            owner=owner,
            filename=tasks_filename,
            data=resolved,
            run_audits=True,
            refuse_audit_failures=True,
        )
    except BaseException:
        for digest in stored_now:
            if not TaskVersion.objects.filter(verifier__snapshot=digest).exists():
                repo_snapshots.snapshot_delete(digest=digest)
        raise
    return report


def uploads_from_files(files: Sequence) -> list[SnapshotUpload]:
    """SnapshotUploads from Django's UploadedFiles (the page and the API)."""
    return [SnapshotUpload(filename=Path(upload.name).name, data=upload.read()) for upload in files]
