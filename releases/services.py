"""Exports and releases: streaming reads of task records, and the writes that make a release.

Reads stream with `.values()` and `.iterator(chunk_size)` (a server-side cursor on PostgreSQL), so
exporting 100,000 tasks holds one chunk in memory, never the whole table. `engine.formats` turns
each record into a trainer's format.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
from celery import current_app
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import F, FilteredRelation, Q, QuerySet
from django.utils import timezone

from accounts.audit import audit_record
from calibration.models import Band, ProbeModel
from calibration.services.calibrations import thresholds_for
from curation import files
from curation.models import Environment, TaskStatus, TaskVersion
from curation.policy import tasks_visible_to
from engine import formats, quality_card, stats
from engine.backends import model_store
from releases import task_filters
from releases.errors import ReleaseError
from releases.models import Release, ReleaseItem, ReleaseStatus
from releases.quality_cards import quality_cards

logger = logging.getLogger(__name__)

CHUNK_SIZE = 2000
# Inside the export's transaction only. PostgreSQL plans a cursor for its first 10% of rows (nested
# loops), but an export reads them all; and the ORDER BY of 100,000 wide rows spills to disk at the
# default 4 MB of sort memory.
EXPORT_SESSION_SETTINGS = ("SET LOCAL cursor_tuple_fraction = 1.0", "SET LOCAL work_mem = '64MB'")

# What a record holds: the names engine.formats reads, mapped to database columns.
VERSION_FIELDS = {
    "task_key": F("task__key"),
    "environment": F("task__environment__name"),
    "status": F("task__status"),
    "version": F("number"),
    "version_hash": F("content_hash"),
}
CONTENT_FIELDS = (
    "prompt",
    "answer",
    "verifier",
    "tools",
    "metadata",
    "domain",
    "authoring_cost_usd",
    "declared_difficulty",
)
# predicted_probability: set when the item-response model predicted the band (no rollouts): rows say band_predicted.
CALIBRATION_FIELDS = (
    "attempts",
    "successes",
    "pass_rate",
    "interval_low",
    "interval_high",
    "band",
    "grpo_signal",
    "predicted_probability",
)


def export_versions(
    *,
    environment: Environment | None = None,
    probe_model: ProbeModel | None = None,
    band: str = "",
    status: str = "",
    domain: str = "",
    user: AbstractBaseUser | None = None,
    exclude_contaminated: bool = False,
    task_filter: task_filters.TaskFilter | None = None,
    with_policy: bool = False,
) -> QuerySet[TaskVersion]:
    """Current task versions matching the filter, as record dicts with the calibration under the probe model.

    The filter is `task_filter` (releases.task_filters, as the task list and the API parse it) or
    else the keyword arguments (TaskFilterError naming a wrong band or status). One LEFT JOIN to the
    calibration of that model (unique per version and model), no subqueries. Without a probe model
    the calibration fields are null. `user` limits to tasks they may see. `exclude_contaminated`
    leaves out versions with an open contamination flag (a public benchmark item).
    `with_policy` adds `calibration_policy`, the sampling policy behind the band (for release_create).
    """
    if task_filter is None:
        task_filter = task_filters.task_filter_make(
            environment=environment,
            probe_model=probe_model,
            band=band,
            status=status,
            domain=domain,
            exclude_contaminated=exclude_contaminated,
        )
    versions = TaskVersion.objects.filter(task__current_version=F("pk"))
    if user is not None:
        versions = versions.filter(task__in=tasks_visible_to(user).values("pk"))
    model_id = task_filter.probe_model.pk if task_filter.probe_model is not None else None
    versions = versions.annotate(
        calibration=FilteredRelation("calibrations", condition=Q(calibrations__probe_model_id=model_id))
    )
    versions = task_filters.versions_matching(versions, task_filter=task_filter)
    calibration_fields = {name: F(f"calibration__{name}") for name in CALIBRATION_FIELDS}
    if with_policy:
        calibration_fields["calibration_policy"] = F("calibration__policy")
    return versions.values("pk", *CONTENT_FIELDS, **VERSION_FIELDS, **calibration_fields).order_by("pk")


def export_records(*, versions: QuerySet, probe_model: ProbeModel | None) -> Iterator[dict]:
    """Stream the records of `export_versions` (or any `.values()` query with `pk`), each tagged with the
    model name and carrying its version's quality card (releases/quality_cards.py).

    A chunk of ids at a time: its cards first, then its rows, since a COPY holds the connection while it
    streams."""
    name = probe_model.name if probe_model is not None else None
    ids = list(versions.values_list("pk", flat=True))
    for start in range(0, len(ids), CHUNK_SIZE):
        chunk = ids[start : start + CHUNK_SIZE]
        cards = quality_cards(version_ids=chunk)
        for record in _stream_values(versions.filter(pk__in=chunk)):
            record["probe_model"] = name if record["attempts"] is not None else None
            record["quality_card"] = cards.get(record["pk"])
            yield record


def _stream_values(values: QuerySet) -> Iterator[dict]:
    """The rows of a `.values()` query, streamed.

    On PostgreSQL: `COPY (query) TO STDOUT (FORMAT BINARY)`, read row by row as psycopg decodes it
    (JSON columns with orjson). Django's own iterator streams too, but its per-value converters and
    json.loads cost about half the export's time, and a named cursor pays a round trip per chunk;
    COPY is ~18% faster than that. Elsewhere (SQLite for a laptop): Django's iterator.
    """
    if connection.vendor != "postgresql":
        yield from values.iterator(chunk_size=CHUNK_SIZE)
        return
    from psycopg.types.json import set_json_loads

    query = values.query
    names = [*query.extra_select, *query.values_select, *query.annotation_select]
    sql, params = query.sql_with_params()
    # A named cursor lives inside a transaction; the export only reads, so nothing is held but a snapshot.
    with transaction.atomic(using=values.db):
        connection.ensure_connection()
        with connection.cursor() as setup:
            for statement in EXPORT_SESSION_SETTINGS:
                setup.execute(statement)
        with connection.connection.cursor() as cursor:
            set_json_loads(orjson.loads, cursor)
            # The column types, from the query planned with no rows; then the rows as one binary COPY,
            # which streams without a round trip per chunk and decodes each value in C.
            cursor.execute(f"SELECT * FROM ({sql}) AS export LIMIT 0", params)
            if len(cursor.description) != len(names):
                raise RuntimeError(f"export query selects {len(cursor.description)} columns, expected {names}")
            types = [column.type_code for column in cursor.description]
            query = cursor.mogrify(sql, params) if params else sql
            with cursor.copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)") as copy:
                copy.set_types(types)
                for row in copy.rows():
                    yield dict(zip(names, row))


def release_records(*, release: Release) -> Iterator[dict]:
    """Stream a release's pinned versions with the calibration and quality card snapshots taken when it was made."""
    items = (
        ReleaseItem.objects.filter(release=release)
        .values(
            *CALIBRATION_FIELDS,
            "quality_card",
            **{name: F(f"task_version__{name}") for name in CONTENT_FIELDS},
            task_key=F("task_version__task__key"),
            environment=F("task_version__task__environment__name"),
            status=F("task_version__task__status"),
            version=F("task_version__number"),
            version_hash=F("task_version__content_hash"),
        )
        .order_by("pk")
    )
    name = release.probe_model.name
    for record in _stream_values(items):
        record["probe_model"] = name if record["attempts"] is not None else None
        yield record


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
