"""Writing export files: rows of a registered format (engine/formats/registry.py) as JSONL or Parquet, whole or
not at all. Fields whose shape differs from task to task (the format's json_columns) are objects in JSONL and
JSON text in Parquet, since one Arrow column type cannot hold them all."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import orjson

from engine.formats.format import CARD_COLUMN, json_text
from engine.formats.registry import ExportFormatError, format_named

FILE_TYPES = ("jsonl", "parquet")


def check_format(format: str, file_type: str = "jsonl") -> None:
    """ExportFormatError, listing the known ones, for an unknown format or file type."""
    format_named(format)
    if file_type not in FILE_TYPES:
        raise ExportFormatError(f"Unknown file type {file_type!r}; use one of {', '.join(FILE_TYPES)}.")


def rows_of(*, records: Iterable[dict], format: str) -> Iterator[dict]:
    """Each record in `format`, lazily."""
    build = format_named(format).row
    return (build(record) for record in records)


def arrow_schema(format: str):
    """The Parquet schema of a format: its columns' types, JSON-shaped columns as strings, the quality card
    last as JSON text."""
    import pyarrow as pa

    declared = format_named(format)
    text = pa.string()
    types = {
        "text": text,
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "messages": pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
        "calibration": pa.struct(
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
        ),
    }
    return pa.schema([*((name, types[kind]) for name, kind in declared.columns), (CARD_COLUMN, text)])


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
    json_columns = format_named(format).json_columns
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
