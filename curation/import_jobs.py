"""Large task files, and every file read with a column mapping, imported in the background: the
upload is stored, a worker imports it. A file to map waits (status `mapping`) until the author has
previewed and confirmed its mapping (`import_job_start`).

The browser request only stores the file and queues the job, so no proxy timeout can cut a
100,000-line import short. The worker reads the file twice, a line at a time (see
imports.tasks_import), records how many lines it has read, and stores the per-line report.
The import itself is one transaction: a killed worker leaves nothing behind, and the job (acks
late) runs again from the start.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from celery import current_app
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from curation import files, imports, repo_uploads
from curation.errors import CurationError
from curation.models import Environment, ImportJob
from engine.task_mapping import ColumnMapping

# How often the first pass records its progress, in lines.
PROGRESS_EVERY = 1000


# Where uploads wait for their import, in the default storage (curation/files.py).
IMPORTS_FOLDER = "imports"


def _upload_store(upload: UploadedFile) -> str:
    """Store the upload through the storage API; returns its storage name."""
    too_large = imports.upload_size_problem(filename=upload.name, size=upload.size)
    if too_large is not None:
        raise CurationError(too_large)
    return files.stored_file_save(name=f"{IMPORTS_FOLDER}/{uuid.uuid4().hex}.upload", content=upload, replace=True)


def _uploads_store(uploads: Sequence[UploadedFile]) -> list[str]:
    """Store every upload, or none: a refusal (too large, the storage unavailable) removes those stored."""
    stored: list[str] = []
    try:
        for upload in uploads:
            stored.append(_upload_store(upload))
    except BaseException:
        for name in stored:
            files.stored_file_delete(name)
        raise
    return stored


def _job_queue(job: ImportJob) -> None:
    transaction.on_commit(lambda: current_app.tasks["curation.tasks.import_tasks"].delay(job.pk))


def import_job_create(
    *,
    environment: Environment,
    owner: AbstractBaseUser,
    upload: UploadedFile,
    run_audits: bool = True,
    queue: bool = True,
    snapshot_uploads: Sequence[UploadedFile] = (),
) -> ImportJob:
    """Store an uploaded task file and queue its import (after the commit).

    With `queue=False` the job waits in status `mapping` for `import_job_start` (the browser's
    column-mapping step reads the stored file to show its columns and a preview). With
    `snapshot_uploads`, the repository snapshots the rows use (curation.repo_uploads) are stored
    beside it and imported with it."""
    stored, *stored_snapshots = _uploads_store([upload, *snapshot_uploads])
    if not queue:
        _unmapped_jobs_drop(owner=owner)
    with transaction.atomic():
        job = ImportJob.objects.create(
            environment=environment,
            owner=owner,
            filename=Path(upload.name).name[:255],
            path=stored,
            size_bytes=upload.size + sum(snapshot.size for snapshot in snapshot_uploads),
            run_audits=run_audits,
            snapshots=[
                [name, Path(snapshot.name).name[:255]] for name, snapshot in zip(stored_snapshots, snapshot_uploads)
            ],
            status=ImportJob.Status.QUEUED if queue else ImportJob.Status.MAPPING,
        )
        if queue:
            _job_queue(job)
    return job


# A file stored for mapping and never imported is dropped when its author stages another after this long.
UNMAPPED_KEPT_FOR = timedelta(days=1)


def _unmapped_jobs_drop(*, owner: AbstractBaseUser) -> None:
    stale = ImportJob.objects.filter(
        owner=owner, status=ImportJob.Status.MAPPING, created_at__lt=timezone.now() - UNMAPPED_KEPT_FOR
    )
    for job in stale:
        files.stored_file_delete(job.path)
        ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.MAPPING).delete()


def import_job_start(*, job: ImportJob, mapping: ColumnMapping) -> ImportJob:
    """Queue a stored import that waits for its mapping, with `mapping`; refuses one already started."""
    with transaction.atomic():
        started = ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.MAPPING).update(
            status=ImportJob.Status.QUEUED, mapping=mapping.as_dict()
        )
        if not started:
            raise CurationError(f"The import of {job.filename} has already started; upload the file again.")
        _job_queue(job)
    job.refresh_from_db()
    return job


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a queued import; a finished one is left as it is (safe to run twice), less any upload a worker
    killed between the job's end and the upload's deletion left behind."""
    job = ImportJob.objects.select_related("environment", "owner").get(pk=job_id)
    finished = (ImportJob.Status.DONE, ImportJob.Status.REJECTED, ImportJob.Status.FAILED)
    if job.status in finished:
        _job_files_delete(job)
        return job
    if job.status == ImportJob.Status.MAPPING:
        return job
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.VALIDATING, lines_read=0, bytes_read=0)

    def on_line(number: int, bytes_read: int) -> None:
        if number % PROGRESS_EVERY == 0:
            ImportJob.objects.filter(pk=job.pk).update(lines_read=number, bytes_read=bytes_read)

    def on_writing() -> None:
        ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.WRITING, bytes_read=job.size_bytes)

    try:
        if job.snapshots:  # a task file with the repository snapshots its rows use
            report = _repo_upload_run(job)
        else:
            # The upload may be in object storage, written by a web process on another machine.
            with files.stored_file_local(job.path) as local:
                report = imports.tasks_import(
                    environment=job.environment,
                    owner=job.owner,
                    filename=job.filename,
                    path=str(local),
                    mapping=ColumnMapping.from_dict(job.mapping) if job.mapping else None,
                    run_audits=job.run_audits,
                    on_line=on_line,
                    on_writing=on_writing,
                )
        status = ImportJob.Status.DONE
    except imports.ImportRejected as rejected:
        report, status = rejected.report, ImportJob.Status.REJECTED
    except FileNotFoundError:
        import_job_mark_failed(job_id=job.pk, reason="The uploaded file is gone; upload it again.")
        job.refresh_from_db()
        return job
    ImportJob.objects.filter(pk=job.pk).update(
        status=status,
        report=report.as_dict(),
        finished_at=timezone.now(),
        bytes_read=job.size_bytes,
    )
    _job_files_delete(job)
    job.refresh_from_db()
    return job


def _stored_bytes(name: str) -> bytes:
    with files.stored_file_local(name) as local:
        return local.read_bytes()


def _repo_upload_run(job: ImportJob) -> imports.ImportReport:
    """A task file with its repository snapshots (curation.repo_uploads), read back from the storage."""
    return repo_uploads.repo_upload(
        environment=job.environment,
        owner=job.owner,
        tasks_filename=job.filename,
        tasks_data=_stored_bytes(job.path),
        snapshot_uploads=[
            repo_uploads.SnapshotUpload(filename=filename, data=_stored_bytes(name)) for name, filename in job.snapshots
        ],
    )


def _job_files_delete(job: ImportJob) -> None:
    for name in [job.path, *(name for name, _ in job.snapshots or [])]:
        if name:
            files.stored_file_delete(name)


def import_job_mark_failed(*, job_id: int, reason: str) -> None:
    """End a job that could not run (its worker kept failing) with the reason, and drop its upload."""
    ImportJob.objects.filter(pk=job_id).exclude(status__in=[ImportJob.Status.DONE, ImportJob.Status.REJECTED]).update(
        status=ImportJob.Status.FAILED, error=reason[:2000], finished_at=timezone.now()
    )
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is not None:
        _job_files_delete(job)
