"""How rounds store rollouts and verdicts: one statement per job, arrays sent in binary.

Rollouts are unique on (campaign, task version, sample index): an insert skips rows a retried job
already wrote, so nothing counts twice."""

from __future__ import annotations

import json
import logging

import psycopg
from django.db import connection
from django.utils import timezone

from calibration import costs
from calibration.models import (
    Campaign,
    Outcome,
    Rollout,
)
from curation.models import TaskVersion
from engine import backends
from engine.episodes.runner import world_failure
from engine.packing import pack_logprobs, pack_tokens

logger = logging.getLogger(__name__)


# Columns a new rollout row fills, with the PostgreSQL array type each travels in (see rollouts_insert).
ROLLOUT_INSERT_COLUMNS = (
    ("campaign_id", "bigint"),
    ("task_version_id", "bigint"),
    ("probe_model_id", "bigint"),
    ("sample_index", "integer"),
    ("seed", "bigint"),
    ("prompt_token_ids", "bytea"),
    ("completion_token_ids", "bytea"),
    ("logprobs", "bytea"),
    ("text", "text"),
    ("finish_reason", "text"),
    ("truncated", "boolean"),
    ("capture", "text"),
    ("logprob_source", "text"),
    ("prompt_ids_source", "text"),
    ("sampling", "jsonb"),
    ("generation_error", "text"),
    ("input_tokens", "integer"),
    ("output_tokens", "integer"),
    ("generation_ms", "float8"),
    ("device_ms", "float8"),
    ("outcome", "text"),
    ("detail", "text"),
    ("cost_usd", "numeric"),
    ("created_at", "timestamptz"),
    ("episode", "jsonb"),
)


def rollouts_insert(rows: list[dict]) -> int:
    """Insert new rollouts (column name -> value, as rollout_row makes them), skipping samples already
    stored; returns how many were inserted.

    The unique (campaign, task version, sample index) makes a retried job a no-op. On PostgreSQL the
    rows travel as one array per column through unnest(): one short statement instead of Django's
    VALUES list of rows x columns parameters, which costs more to build than to run. The arrays go
    in PostgreSQL's binary format on a server-side-binding cursor: token ids and logprobs travel as
    the bytes they are, not as hex text that Django's client-side binding would quote into the SQL.
    """
    if not rows:
        return 0
    now = timezone.now()
    if connection.vendor != "postgresql":
        return _rollouts_insert_portable([{**row, "created_at": now} for row in rows])
    names = [name for name, _ in ROLLOUT_INSERT_COLUMNS]
    columns = []
    for name, kind in ROLLOUT_INSERT_COLUMNS:
        if name == "created_at":
            values = [now] * len(rows)
        elif kind == "jsonb":  # as text: SQL NULL stays NULL, a JSON value is cast below
            texts: dict[int, str] = {}  # one sampling dict is shared by a job's rows: encode it once
            values = [
                None
                if row[name] is None
                else texts.get(id(row[name])) or texts.setdefault(id(row[name]), json.dumps(row[name]))
                for row in rows
            ]
        else:
            values = [row[name] for row in rows]
        columns.append(values)
    # %b: each array parameter in PostgreSQL's binary format.
    arrays = ", ".join(f"%b::{'text' if kind == 'jsonb' else kind}[]" for _, kind in ROLLOUT_INSERT_COLUMNS)
    select = ", ".join(f"{name}::jsonb" if kind == "jsonb" else name for name, kind in ROLLOUT_INSERT_COLUMNS)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            f"INSERT INTO {Rollout._meta.db_table} ({', '.join(names)}) "
            f"SELECT {select} FROM unnest({arrays}) AS new({', '.join(names)}) "
            "ON CONFLICT (campaign_id, task_version_id, sample_index) DO NOTHING",
            columns,
        )
        return cursor.rowcount


def rollout_row(
    *,
    campaign: Campaign,
    version: TaskVersion,
    sample_index: int,
    seed: int,
    generation: backends.Generation,
    episode: dict | None,
    sampling: dict,
    device_ms: float,
) -> dict:
    """The columns of one sampled rollout (not saved): what the backend produced, its cost, and for a
    failed generation the outcome `generation_error` (an infrastructure error, never a verdict),
    `prompt_too_long` (the task's prompt does not fit the model's context) or `world_error` (the task's
    world failed: it could not reset, or the episode's tool ran past its time limit; the detail names it).
    A dict rather than a Rollout: building 500 model instances a job cost more than inserting them."""
    probe_model = campaign.probe_model
    failed = generation.error is not None
    # The world failed (it could not reset, or a tool ran past its limit): stored as the world's outcome.
    world = (generation.error or "") if generation.error_kind == "world" else world_failure(episode)
    if world:
        outcome, detail = Outcome.WORLD_ERROR, world
    elif failed:
        outcome = Outcome.PROMPT_TOO_LONG if generation.error_kind == "prompt_too_long" else Outcome.GENERATION_ERROR
        detail = f"generation failed: {generation.error}"
    else:
        outcome, detail = None, ""
    return {
        "campaign_id": campaign.pk,
        "task_version_id": version.pk,
        "probe_model_id": probe_model.pk,
        "sample_index": sample_index,
        "seed": seed,
        "prompt_token_ids": pack_tokens(generation.prompt_token_ids),
        "completion_token_ids": pack_tokens(generation.completion_token_ids),
        "logprobs": pack_logprobs(generation.logprobs),
        "text": generation.text,
        "finish_reason": generation.finish_reason,
        "truncated": generation.truncated,
        "capture": "" if failed else generation.capture,
        "logprob_source": generation.logprob_source,
        "prompt_ids_source": generation.prompt_ids_source,
        "sampling": sampling,
        "generation_error": generation.error or "",
        "input_tokens": generation.input_tokens,
        "output_tokens": generation.output_tokens,
        "generation_ms": generation.latency_ms,
        "outcome": outcome,
        "detail": detail,
        "episode": episode,
        "device_ms": device_ms,
        "cost_usd": costs.rollout_cost(
            price=costs.Price.of(probe_model),
            device_ms=device_ms,
            input_tokens=generation.input_tokens,
            output_tokens=generation.output_tokens,
        ),
    }


def verdicts_save(verdicts: list[tuple], *, verified_at) -> None:
    """Write (rollout id, outcome, reward, detail, verify_ms) verdicts in one statement. `outcome IS NULL`
    keeps a concurrent duplicate job from overwriting."""
    if not verdicts:
        return
    if connection.vendor != "postgresql":
        _verdicts_save_portable(verdicts, verified_at=verified_at)
        return
    # Django's bulk_update builds a CASE per column and row; unnest() of arrays is ~10x cheaper.
    pks, outcomes, rewards, details, latencies = (list(column) for column in zip(*verdicts))
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Rollout._meta.db_table} AS rollout
            SET outcome = verdict.outcome, reward = verdict.reward, detail = verdict.detail,
                verify_ms = verdict.verify_ms, verified_at = %s
            FROM unnest(%s::bigint[], %s::text[], %s::float8[], %s::text[], %s::float8[])
                AS verdict(id, outcome, reward, detail, verify_ms)
            WHERE rollout.id = verdict.id AND rollout.outcome IS NULL
            """,
            [verified_at, pks, outcomes, rewards, details, latencies],
        )


def _db_value(name: str, value):
    """A column value as the database adapter takes it (JSON as text, datetimes and decimals adapted)."""
    return Rollout._meta.get_field(name).get_db_prep_save(value, connection)


def _rollouts_insert_portable(rows: list[dict]) -> int:
    """rollouts_insert on other databases (the embedded SQLite): the same ON CONFLICT DO NOTHING and the
    same count, of rows really inserted (the adapter sums each statement's changes over executemany)."""
    names = [name for name, _ in ROLLOUT_INSERT_COLUMNS]
    columns = [Rollout._meta.get_field(name).column for name in names]
    placeholders = ", ".join(["%s"] * len(names))
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {Rollout._meta.db_table} ({', '.join(columns)}) VALUES ({placeholders}) "
            "ON CONFLICT (campaign_id, task_version_id, sample_index) DO NOTHING",
            [[_db_value(name, row[name]) for name in names] for row in rows],
        )
        return cursor.rowcount


def _verdicts_save_portable(verdicts: list[tuple], *, verified_at) -> None:
    """verdicts_save on other databases, with the same `outcome IS NULL` guard."""
    at = _db_value("verified_at", verified_at)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {Rollout._meta.db_table} SET outcome = %s, reward = %s, detail = %s, verify_ms = %s, "
            "verified_at = %s WHERE id = %s AND outcome IS NULL",
            [[outcome, reward, detail, verify_ms, at, pk] for pk, outcome, reward, detail, verify_ms in verdicts],
        )
