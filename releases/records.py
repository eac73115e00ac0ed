"""Streaming reads of task records, for exports and for releases.

Reads stream with `.values()` and `.iterator(chunk_size)` (a server-side cursor on PostgreSQL, a binary
COPY), so exporting 100,000 tasks holds one chunk in memory, never the whole table. `engine.formats`
turns each record into a trainer's format.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, FilteredRelation, Q, QuerySet

from calibration.models import ProbeModel
from curation.models import Environment, TaskVersion
from curation.policy import tasks_visible_to
from releases import task_filters
from releases.models import Release, ReleaseItem
from releases.quality_cards import quality_cards

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

    In: the query; out: its rows as dicts. On PostgreSQL: `COPY (query) TO STDOUT (FORMAT BINARY)`, read
    row by row as psycopg decodes it (JSON columns with orjson; why, and the figures:
    docs/benchmarks-export.md). Elsewhere (SQLite for a laptop): Django's iterator.
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
