"""Trainer formats: one task record in, one row per format out. Pure: no Django import.

A *record* is a flat dict read from the database (see releases.services.EXPORT_FIELDS): task key,
environment, version number and hash, content, and the calibration under one probe model. Every
format carries the task key, the version hash and the calibration, so a trainer can seed a
curriculum and trace any row back to the exact version it came from.

Fields whose shape differs from task to task (verifier configs, tools, metadata) cannot share one
Arrow column type, so each format's schema marks them as JSON: JSONL writes them as objects and
Parquet as JSON text. The `trl` and `verifiers` formats always carry them as JSON text, so both
files of those formats load into identical `datasets` features. Every row ends with `quality_card`, the
version's quality card (engine/quality_card.py; null when the record was read without one).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from engine.quality_card import card_of, card_text

FORMATS = ("native", "trl", "verifiers", "nemo_gym")
FILE_TYPES = ("jsonl", "parquet")


class ExportFormatError(ValueError):
    """An unknown format or file type was asked for; the message lists the known ones."""


def json_text(value: Any) -> str:
    """Compact JSON with sorted keys: how JSON-shaped columns are written as text."""
    # orjson: the export's time goes mostly into JSON, and orjson is several times faster than json.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def calibration_of(record: dict) -> dict | None:
    """The calibration block every row carries; None when the version was never probed by the model.

    `band_predicted` is true when no rollout decided the band: the item-response model predicted it for
    a new checkpoint from the run's earlier ones (the record's `predicted_probability` is set)."""
    if record.get("attempts") is None:
        return None
    return {
        "probe_model": record.get("probe_model"),
        "attempts": record["attempts"],
        "successes": record.get("successes"),
        "pass_rate": record.get("pass_rate"),
        "interval": [record.get("interval_low"), record.get("interval_high")],
        "band": record.get("band"),
        "band_predicted": record.get("predicted_probability") is not None,
        "grpo_signal": record.get("grpo_signal"),
    }


def _cost_text(value: Any) -> str:
    # Decimal dollars stay exact as text; the import format accepts a string ("" when not given).
    return "" if value is None else str(value)


# What native rows add to the import format; the importer refuses unknown fields, so drop these to re-import.
NATIVE_EXTRA_FIELDS = ("environment", "status", "version", "version_hash", "calibration", "quality_card")


def native_row(record: dict) -> dict:
    """The import format plus environment, status, version, hash and calibration (NATIVE_EXTRA_FIELDS)."""
    return {
        "key": record["task_key"],
        "environment": record["environment"],
        "domain": record["domain"],
        "status": record.get("status"),
        "version": record["version"],
        "version_hash": record["version_hash"],
        "prompt": record["prompt"],
        "answer": record["answer"],
        "verifier": record["verifier"],
        "tools": record.get("tools") or [],
        "metadata": record.get("metadata") or {},
        "authoring_cost_usd": _cost_text(record.get("authoring_cost_usd")),
        "difficulty": record.get("declared_difficulty"),
        "calibration": calibration_of(record),
        "quality_card": card_of(record),
    }


def trl_row(record: dict) -> dict:
    """TRL GRPOTrainer: `prompt` as chat messages; the other columns reach the reward function."""
    return {
        "prompt": record["prompt"],
        "answer": record["answer"],
        "verifier": json_text(record["verifier"]),
        "tools": json_text(record.get("tools") or []),
        "task_key": record["task_key"],
        "environment": record["environment"],
        "version_hash": record["version_hash"],
        "calibration": calibration_of(record),
        "quality_card": card_text(card_of(record)),
    }


def verifiers_row(record: dict) -> dict:
    """Prime Intellect verifiers: `prompt`, `answer`, `info` (JSON text) and `task` (the environment)."""
    info = {
        "task_key": record["task_key"],
        "version": record["version"],
        "version_hash": record["version_hash"],
        "verifier": record["verifier"],
        "tools": record.get("tools") or [],
        "metadata": record.get("metadata") or {},
    }
    return {
        "prompt": record["prompt"],
        "answer": record["answer"],
        "info": json_text(info),
        "task": record["environment"],
        "task_key": record["task_key"],
        "version_hash": record["version_hash"],
        "calibration": calibration_of(record),
        "quality_card": card_text(card_of(record)),
    }


def responses_tool(tool: dict) -> dict:
    """A Chat Completions tool schema (`{"type": "function", "function": {...}}`) as a Responses API
    function tool (`{"type": "function", "name", "parameters", "strict", ...}`), the shape NeMo Gym
    validates `responses_create_params.tools` against. Other tools pass through unchanged."""
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, dict):
        return tool
    flat = {"type": "function", "name": function["name"], "parameters": function.get("parameters")}
    if function.get("description"):
        flat["description"] = function["description"]
    # Chat Completions defaults to non-strict; the Responses API to strict: keep the task's meaning.
    flat["strict"] = bool(function.get("strict", False))
    return flat


def chat_tool(tool: dict) -> dict:
    """The inverse of responses_tool: a Responses API function tool as a Chat Completions tool schema."""
    if tool.get("type") != "function" or "function" in tool or "name" not in tool:
        return tool
    function = {key: tool[key] for key in ("name", "description", "parameters") if tool.get(key) is not None}
    if tool.get("strict"):  # non-strict is the Chat Completions default
        function["strict"] = True
    return {"type": "function", "function": function}


def nemo_gym_row(record: dict) -> dict:
    """NeMo Gym: `responses_create_params` (input, and tools for tool tasks, as Responses API function
    tools); verifier fields top-level."""
    params: dict[str, Any] = {"input": record["prompt"]}
    if record.get("tools"):
        params["tools"] = [responses_tool(tool) for tool in record["tools"]]
    return {
        "responses_create_params": params,
        "expected_answer": record["answer"],
        "verifier": record["verifier"],
        "task_key": record["task_key"],
        "environment": record["environment"],
        "version_hash": record["version_hash"],
        "calibration": calibration_of(record),
        "quality_card": card_of(record),
    }


ROW_BUILDERS: dict[str, Callable[[dict], dict]] = {
    "native": native_row,
    "trl": trl_row,
    "verifiers": verifiers_row,
    "nemo_gym": nemo_gym_row,
}

# Columns written as JSON text in Parquet because their shape varies from task to task.
JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "native": ("verifier", "tools", "metadata", "quality_card"),
    "trl": (),
    "verifiers": (),
    "nemo_gym": ("responses_create_params", "verifier", "quality_card"),
}


def check_format(format: str, file_type: str = "jsonl") -> None:
    if format not in FORMATS:
        raise ExportFormatError(f"Unknown format {format!r}; use one of {', '.join(FORMATS)}.")
    if file_type not in FILE_TYPES:
        raise ExportFormatError(f"Unknown file type {file_type!r}; use one of {', '.join(FILE_TYPES)}.")


def rows_of(*, records: Iterable[dict], format: str) -> Iterator[dict]:
    """Each record in `format`, lazily."""
    check_format(format)
    build = ROW_BUILDERS[format]
    return (build(record) for record in records)


def arrow_schema(format: str):
    """The Parquet schema of a format: fixed column types, JSON-shaped columns as strings."""
    import pyarrow as pa

    check_format(format)
    messages = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    calibration = pa.struct(
        [
            ("probe_model", pa.string()),
            ("attempts", pa.int64()),
            ("successes", pa.int64()),
            ("pass_rate", pa.float64()),
            ("interval", pa.list_(pa.float64())),
            ("band", pa.string()),
            ("band_predicted", pa.bool_()),
            ("grpo_signal", pa.float64()),
        ]
    )
    text = pa.string()
    columns = {
        "native": [
            ("key", text),
            ("environment", text),
            ("domain", text),
            ("status", text),
            ("version", pa.int64()),
            ("version_hash", text),
            ("prompt", messages),
            ("answer", text),
            ("verifier", text),
            ("tools", text),
            ("metadata", text),
            ("authoring_cost_usd", text),
            ("difficulty", pa.float64()),
            ("calibration", calibration),
        ],
        "trl": [
            ("prompt", messages),
            ("answer", text),
            ("verifier", text),
            ("tools", text),
            ("task_key", text),
            ("environment", text),
            ("version_hash", text),
            ("calibration", calibration),
        ],
        "verifiers": [
            ("prompt", messages),
            ("answer", text),
            ("info", text),
            ("task", text),
            ("task_key", text),
            ("version_hash", text),
            ("calibration", calibration),
        ],
        "nemo_gym": [
            ("responses_create_params", text),
            ("expected_answer", text),
            ("verifier", text),
            ("task_key", text),
            ("environment", text),
            ("version_hash", text),
            ("calibration", calibration),
        ],
    }[format]
    # Every format's rows end with the task version's quality card (engine/quality_card.py) as JSON text.
    return pa.schema([*columns, ("quality_card", text)])


def write_jsonl(*, rows: Iterable[dict], stream: IO[bytes], lines_per_write: int = 1000) -> int:
    """Write rows as JSON lines to a binary stream, a batch of lines per write; returns the row count."""
    count = 0
    buffer: list[bytes] = []
    dumps = orjson.dumps
    for row in rows:
        buffer.append(dumps(row, option=orjson.OPT_APPEND_NEWLINE))
        count += 1
        if len(buffer) >= lines_per_write:
            stream.write(b"".join(buffer))
            buffer.clear()
    if buffer:
        stream.write(b"".join(buffer))
    return count


def write_parquet(*, rows: Iterable[dict], path: Path | str, format: str, batch_size: int = 5000) -> int:
    """Write rows to a Parquet file, one row group per batch, so memory stays bounded; returns the count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(format)
    json_columns = JSON_COLUMNS[format]
    count = 0
    with pq.ParquetWriter(str(path), schema, compression="zstd") as writer:
        batch: list[dict] = []
        for row in rows:
            for column in json_columns:
                value = row[column]
                row[column] = None if value is None else json_text(value)
            batch.append(row)
            if len(batch) >= batch_size:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
                batch = []
        # No rows: the schema and no row group at all. A row group of zero rows makes readers that size
        # their batches by the first row group (🤗 datasets) ask for batches of 0 and fail.
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count


def write_file(*, records: Iterable[dict], format: str, file_type: str, path: Path | str) -> int:
    """Write `records` in `format` as a JSONL or Parquet file at `path`; returns the row count.

    The rows go to a temporary file beside `path`, renamed over it once complete: a failure part
    way (a bad row, a full disk) leaves no partial file behind, and readers never see one.
    """
    check_format(format, file_type)
    rows = rows_of(records=records, format=format)
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        if file_type == "parquet":
            count = write_parquet(rows=rows, path=partial, format=format)
        else:
            with open(partial, "wb") as stream:
                count = write_jsonl(rows=rows, stream=stream)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def sha256_of_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
