"""Releases: the writes that make one (pin the filtered versions with their calibrations, write each
format's file and the manifest), retry one, and where its files live. The records they stream come from
releases.records."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import uuid
from collections import Counter
from pathlib import Path

from celery import current_app
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.audit import audit_record
from calibration.models import Band, ProbeModel
from calibration.services.policies import thresholds_for
from curation import files
from curation.models import Environment, TaskStatus
from engine import formats, quality_card, stats
from engine.backends import model_store
from releases.errors import ReleaseError
from releases.models import Release, ReleaseItem, ReleaseStatus
from releases.quality_cards import quality_cards
from releases.records import CALIBRATION_FIELDS, CHUNK_SIZE, export_versions, release_records

logger = logging.getLogger(__name__)


def release_create(
    *,
    user: AbstractBaseUser,
    probe_model: ProbeModel,
    environment: Environment | None = None,
    band: str = Band.IN_BAND,
    status: str = TaskStatus.APPROVED,
    domain: str = "",
    allow_empty: bool = False,
    exclude_contaminated: bool = False,
    include_thin_evidence: bool = False,
) -> Release:
    """Pin the matching current versions and their calibration; the files are built by `release_build`.

    Queues the build after the commit, so the worker always finds the release. Raises ReleaseError
    when no task matches, unless `allow_empty` (an empty release is then built, with a warning).
    A task whose attempts are too few for its band (the stopping rule does not decide that band on
    them: a calibration from before bands needed it, or from other thresholds) is left out, unless
    `include_thin_evidence`; either way the manifest warns and names them.
    """
    versions = export_versions(
        environment=environment,
        probe_model=probe_model,
        band=band,
        status=status,
        domain=domain,
        user=user,
        exclude_contaminated=exclude_contaminated,
        with_policy=True,
    )
    if not allow_empty and not versions.exists():
        filter_text = _filter_text(
            environment=environment, probe_model=probe_model, band=band, status=status, domain=domain
        )
        raise ReleaseError(
            f"No task matches ({filter_text}): "
            "nothing to release. Approve or probe tasks first, or ask for an empty release explicitly."
        )
    environments = Environment.objects.filter(pk=environment.pk) if environment else Environment.objects.all()
    thresholds = {e.name: thresholds_for(e) for e in environments}
    with transaction.atomic():
        release = Release.objects.create(
            created_by=user,
            environment=environment,
            probe_model=probe_model,
            filter={
                "environment": environment.name if environment else None,
                "probe_model": probe_model.name,
                "band": band or None,
                "status": status or None,
                "domain": domain or None,
                "exclude_contaminated": exclude_contaminated,
                "include_thin_evidence": include_thin_evidence,
            },
            thresholds={e.name: {"floor": e.floor, "retire_at": e.retire_at} for e in environments},
        )
        pinned, thin = _pin_items(
            release=release, versions=versions, thresholds=thresholds, include_thin_evidence=include_thin_evidence
        )
        if thin and not pinned and not allow_empty:
            raise ReleaseError(
                f"Every matching task ({len(thin)}) has too few attempts for its band: nothing to release. "
                "Probe them again, or ask to include tasks with thin evidence explicitly."
            )
        if thin:
            release.manifest = {"warnings": [_thin_warning(thin, included=include_thin_evidence)]}
            release.save(update_fields=["manifest"])
        # By name: the task module imports this one. The registered task honours eager mode and mocks.
        transaction.on_commit(lambda: current_app.tasks["releases.tasks.build_release"].delay(release.pk))
    return release


def _pin_items(
    *, release: Release, versions: QuerySet, thresholds: dict[str, stats.Thresholds], include_thin_evidence: bool
) -> tuple[int, list[str]]:
    """Write the release's items, a chunk at a time; returns how many were pinned and the keys of tasks
    whose attempts are too few for their band (pinned only with `include_thin_evidence`)."""
    supported = _evidence_check(thresholds)
    batch, pinned, thin = [], 0, []
    for record in versions.iterator(chunk_size=CHUNK_SIZE):
        if record["band"] and not supported(record):
            thin.append(record["task_key"])
            if not include_thin_evidence:
                continue
        pinned += 1
        batch.append(
            ReleaseItem(
                release=release,
                task_version_id=record["pk"],
                **{n: record[n] for n in CALIBRATION_FIELDS if n != "band"},
                band=record["band"] or "",
            )
        )
        if len(batch) >= CHUNK_SIZE:
            ReleaseItem.objects.bulk_create(batch)
            batch = []
    ReleaseItem.objects.bulk_create(batch)
    return pinned, thin


def _items_cards_pin(*, release: Release) -> None:
    """Pin each item's quality card as it is now, a chunk at a time: in the build (a worker), not in
    release_create's request, since cards cost about 0.3 ms each (docs/benchmarks-export.md). Items that
    have one keep it, so a second build changes nothing."""
    items = ReleaseItem.objects.filter(release=release, quality_card__isnull=True).order_by("pk")
    pending = list(items.values_list("pk", "task_version_id"))
    for start in range(0, len(pending), CHUNK_SIZE):
        chunk = pending[start : start + CHUNK_SIZE]
        cards = quality_cards(version_ids=[version for _, version in chunk], release_id=release.pk)
        batch = [ReleaseItem(pk=pk, quality_card=cards.get(version)) for pk, version in chunk]
        ReleaseItem.objects.bulk_update(batch, ["quality_card"])


def _evidence_check(thresholds: dict[str, stats.Thresholds]):
    """record -> whether its attempts decide its band (stats.evidence_decides), memoised by evidence."""
    seen: dict[tuple, bool] = {}

    def supported(record: dict) -> bool:
        if record["band"] not in stats.BANDS:  # undecided and borderline claim nothing
            return True
        if record.get("predicted_probability") is not None:
            # Predicted for a checkpoint (calibration/services/checkpoints.py): no attempts, but a band at least
            # the re-profile's level probable; pinned, and marked band_predicted in every row.
            return True
        confidence = (record.get("calibration_policy") or {}).get("confidence", 0.95)
        key = (record["environment"], record["band"], record["successes"], record["attempts"], confidence)
        if key not in seen:
            seen[key] = stats.evidence_decides(
                band=record["band"],
                successes=record["successes"] or 0,
                attempts=record["attempts"] or 0,
                thresholds=thresholds[record["environment"]],
                confidence=confidence,
            )
        return seen[key]

    return supported


def _thin_warning(keys: list[str], *, included: bool) -> str:
    shown = ", ".join(sorted(keys)[:20]) + (f" and {len(keys) - 20} more" if len(keys) > 20 else "")
    what = "included because the release asked for them" if included else "left out"
    return (
        f"{len(keys)} task(s) have too few attempts for their band (the stopping rule does not decide it on "
        f"them): {what}. Probe them again to decide their band. {shown}"
    )


def _filter_text(*, environment, probe_model, band, status, domain) -> str:
    parts = [
        f"status {status}" if status else "any status",
        f"band {band} under {probe_model.name}" if band else "any band",
    ]
    parts.append(f"environment {environment.name}" if environment else "every environment")
    if domain:
        parts.append(f"domain {domain}")
    return ", ".join(parts)


RELEASES_FOLDER = "releases"


def release_files_folder(*, release: Release) -> str:
    """The storage folder of a built release's files."""
    return release.files_folder or f"{RELEASES_FOLDER}/{release.pk}"


def release_file_name(*, release: Release, format: str, file_type: str) -> str:
    """The storage name of one built file of a release (curation/files.py reads it)."""
    formats.check_format(format, file_type)
    return f"{release_files_folder(release=release)}/{format}.{file_type}"


def release_directory(*, release: Release) -> Path:
    """The built files' folder on this machine's disk; only with the filesystem storage (trainer glue, tests)."""
    return Path(default_storage.path(release_files_folder(release=release)))


def release_file_path(*, release: Release, format: str, file_type: str) -> Path:
    """One built file on this machine's disk; only with the filesystem storage."""
    return Path(default_storage.path(release_file_name(release=release, format=format, file_type=file_type)))


def release_mark_failed(*, release_id: int, reason: str) -> None:
    """End a release that could not be built as `failed`, with the reason (a ready one stays ready)."""
    Release.objects.filter(pk=release_id).exclude(status=ReleaseStatus.READY).update(
        status=ReleaseStatus.FAILED, error=reason[:2000]
    )


def release_retry(*, release: Release) -> Release:
    """Queue a failed release's build again (after the commit); ReleaseError unless it failed."""
    with transaction.atomic():
        updated = Release.objects.filter(pk=release.pk, status=ReleaseStatus.FAILED).update(
            status=ReleaseStatus.PENDING, error=""
        )
        if not updated:
            raise ReleaseError(f"Release {release.pk} is {release.status}; only a failed release can be retried.")
        transaction.on_commit(lambda: current_app.tasks["releases.tasks.build_release"].delay(release.pk))
    release.refresh_from_db()
    return release


def probe_model_identity(*, probe_model: ProbeModel) -> dict[str, str]:
    """The model a release's calibration came from: name, backend, model, file and revision.

    An in-process (transformers) model names its weights file and revision even when it was registered
    with neither, as the embedded default once was; a server model names what it was registered with.
    """
    identity = {"name": probe_model.name, "backend": probe_model.backend, "model": probe_model.model, "file": ""}
    identity["revision"] = probe_model.revision
    if probe_model.backend == ProbeModel.Backend.TRANSFORMERS:
        try:
            identity |= model_store.model_identity(model=probe_model.model, revision=probe_model.revision)
        except model_store.ModelFilesError as error:
            logger.warning("release manifest: the files of probe model %s are not here: %s", probe_model.name, error)
    return identity


def _release_files_write(*, release: Release, folder: Path) -> dict[str, dict]:
    """Every format as every file type in `folder`; each file's rows, bytes and SHA-256 by its name."""
    files = {}
    for format in formats.names():
        for file_type in formats.FILE_TYPES:
            path = folder / f"{format}.{file_type}"
            rows = formats.write_file(
                records=release_records(release=release), format=format, file_type=file_type, path=path
            )
            files[f"{format}.{file_type}"] = {
                "rows": rows,
                "bytes": path.stat().st_size,
                "sha256": formats.sha256_of_file(path),
            }
    return files


def _release_manifest(*, release: Release, files: dict[str, dict]) -> dict:
    """What the release holds: its filter, thresholds and probe model, counts by band and domain, the files."""
    items = ReleaseItem.objects.filter(release=release)
    manifest = {
        "release": release.pk,
        "filter": release.filter,
        "thresholds": release.thresholds,
        "probe_model": probe_model_identity(probe_model=release.probe_model),
        "tasks": items.count(),
        "bands": dict(Counter(band or "uncalibrated" for band in items.values_list("band", flat=True))),
        # Of those, bands the item-response model predicted (no rollouts): each row says band_predicted.
        "predicted_bands": items.filter(predicted_probability__isnull=False).count(),
        "domains": dict(Counter(items.values_list("task_version__domain", flat=True))),
        # The tasks' quality cards in sum (engine/quality_card.py); items pinned without a card are left out.
        "quality_cards": quality_card.cards_summary(
            items.exclude(quality_card__isnull=True)
            .values_list("quality_card", flat=True)
            .iterator(chunk_size=CHUNK_SIZE)
        ),
        "created_by": release.created_by.get_username(),
        "created_at": release.created_at.isoformat(),
        "files": files,
        # The release's own digest: the sha256 of its files' names and digests (canonical JSON), so one
        # line (the audit log's, the manifest's) names exactly these files.
        "sha256": hashlib.sha256(
            json.dumps({name: entry["sha256"] for name, entry in files.items()}, sort_keys=True).encode()
        ).hexdigest(),
        # Warnings from pinning (tasks with too few attempts for their band) come first.
        "warnings": list((release.manifest or {}).get("warnings", [])),
    }
    if not manifest["tasks"]:
        manifest["warnings"].append(
            "This release is empty: no task matched its filter when it was pinned. Its files hold no rows "
            "(Parquet: the schema and no row group); 🤗 datasets refuses to load a split with no rows."
        )
    return manifest


def _stored_folder_delete(folder: str) -> None:
    try:
        _, names = default_storage.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        files.stored_file_delete(f"{folder}/{name}")


def _stale_attempts_delete(*, release: Release, keep: str) -> None:
    """Drop the files of a release's earlier build attempts (failed or overtaken), keeping `keep`'s."""
    root = f"{RELEASES_FOLDER}/{release.pk}"
    try:
        attempts, loose = default_storage.listdir(root)
    except FileNotFoundError:
        return
    for attempt in attempts:
        if f"{root}/{attempt}" != keep:
            _stored_folder_delete(f"{root}/{attempt}")
    for name in loose:  # files of the layout before build attempts had folders
        files.stored_file_delete(f"{root}/{name}")


def release_build(*, release_id: int) -> Release:
    """Write every format as JSONL and Parquet, then record the manifest; safe to run twice.

    A ready release is left alone. Files are written to a temporary folder on this machine, then stored
    (curation/files.py) in a folder of this attempt's, and the release names that folder only once every
    file is stored, so a crash mid-build never leaves a half-written release that looks finished.
    """
    with transaction.atomic():
        release = Release.objects.select_for_update().select_related("probe_model", "created_by").get(pk=release_id)
        if release.status == ReleaseStatus.READY:
            return release
        release.status = ReleaseStatus.BUILDING
        release.save(update_fields=["status"])
    # A folder of its own per attempt, written on this machine, then stored: a redelivered task running
    # alongside cannot mix files with this one, and the release points at a folder only once it is whole.
    folder = f"{RELEASES_FOLDER}/{release.pk}/{uuid.uuid4().hex[:8]}"
    try:
        _items_cards_pin(release=release)
        with tempfile.TemporaryDirectory(prefix="passband-release-") as staging:
            built = _release_files_write(release=release, folder=Path(staging))
            manifest = _release_manifest(release=release, files=built)
            for name in built:
                with open(Path(staging) / name, "rb") as content:
                    files.stored_file_save(name=f"{folder}/{name}", content=content, replace=True)
    except Exception as error:
        logger.exception("release %s failed to build", release.pk)
        _stored_folder_delete(folder)
        release_mark_failed(release_id=release.pk, reason=str(error))
        raise
    finished = (
        Release.objects.exclude(status=ReleaseStatus.READY)
        .filter(pk=release.pk)
        .update(status=ReleaseStatus.READY, manifest=manifest, built_at=timezone.now(), error="", files_folder=folder)
    )
    release.refresh_from_db()
    if not finished:  # a duplicate run finished first: its files are the release's, and it recorded the build
        _stored_folder_delete(folder)
        return release
    _stale_attempts_delete(release=release, keep=folder)
    audit_record(
        actor=release.created_by,
        action="release_build",
        obj=release,
        detail={"tasks": release.items.count(), "sha256": manifest.get("sha256", "")},
    )
    return release
