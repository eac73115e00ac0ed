"""Files of rows, read a batch at a time: JSONL, CSV, Parquet, an Arrow file or a `datasets` folder.

A `TaskSource` is one file (bytes in memory or a path) or a Hugging Face `datasets` folder (what
`Dataset.save_to_disk` writes: `state.json` naming its `.arrow` shards). `records()` yields
(number, row or None, problems) for every row: JSONL and CSV rows are numbered by line, Parquet
and Arrow rows by their position from 1 (`unit` says which). Parquet and Arrow are read a record
batch at a time with pyarrow, so memory holds one batch, never the table. Nothing is downloaded.
Problems name the file, the line or row, and the field.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from engine.task_format import LineProblem

READ_CHUNK = 1 << 16
ROW_BATCH = 512  # rows per pyarrow record batch: bounded memory for tables of any length
MAX_ROW_GROUP_BYTES = 256 * 1024 * 1024  # Parquet decompresses a row group's columns at once
COLUMN_SAMPLE_ROWS = 100  # JSONL has no header: its columns are those of its first rows
SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".txt": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
}
KINDS = ("jsonl", "csv", "parquet", "arrow")

Record = tuple[int, Any, list[LineProblem]]


class SourceError(Exception):
    """A file that cannot be read at all; the message says what to do."""


def source_kind(filename: str) -> str:
    """The reader a file name asks for; anything unknown is read as JSONL (Passband's own format)."""
    return SUFFIXES.get(Path(filename).suffix.lower(), "jsonl")


def dataset_files(folder: Path) -> list[Path]:
    """The `.arrow` shards of a `datasets` folder, in order; SourceError when it is not one."""
    splits_file = folder / "dataset_dict.json"
    if splits_file.is_file():
        splits = json.loads(splits_file.read_text(encoding="utf-8")).get("splits", [])
        example = folder / (splits[0] if splits else "test")
        raise SourceError(f"holds the splits {', '.join(splits)}; pass one split's folder, e.g. {example}")
    state = folder / "state.json"
    if state.is_file():
        try:
            entries = json.loads(state.read_text(encoding="utf-8"))["_data_files"]
            files = [folder / entry["filename"] for entry in entries]
        except (ValueError, KeyError, TypeError) as error:
            raise SourceError(f"state.json does not list the data files ({error})") from None
    else:
        files = sorted(folder.glob("*.arrow"))
    missing = [path.name for path in files if not path.is_file()]
    if missing:
        raise SourceError(f"is missing {', '.join(missing)}")
    if not files:
        raise SourceError("holds no .arrow files: save the dataset with Dataset.save_to_disk, or pass a file")
    return files


@dataclass
class TaskSource:
    """A file of rows to read, twice if need be: `data` in memory or the file or folder at `path`."""

    filename: str
    data: bytes | None = None
    path: Path | None = None
    kind: str = ""
    bytes_read: int = field(default=0, init=False)  # how far `records()` has read, for progress

    def __post_init__(self) -> None:
        if (self.data is None) == (self.path is None):
            raise ValueError("pass data or path, not both")
        if self.path is not None:
            self.path = Path(self.path)
        if not self.kind:
            self.kind = "arrow" if self.path is not None and self.path.is_dir() else source_kind(self.filename)
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}")

    @property
    def unit(self) -> str:
        """What a problem's number counts: lines of text, or rows of a table."""
        return "row" if self.kind in ("parquet", "arrow") else "line"

    @property
    def size_bytes(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.path is not None  # one of the two, see __post_init__
        if self.path.is_dir():
            return sum(path.stat().st_size for path in self.path.iterdir() if path.is_file())
        return self.path.stat().st_size

    def _open(self, path: Path | None = None) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        chosen = path or self.path
        assert chosen is not None  # one of data and path, see __post_init__
        return open(chosen, "rb")

    def _arrow_files(self) -> list[Path | None]:
        if self.path is not None and self.path.is_dir():
            return list(dataset_files(self.path))
        return [None]  # the one file (or the bytes)

    def records(self, *, max_line_bytes: int) -> Iterator[Record]:
        """(line or row number, the row as a dict or None, problems), for every row in order.

        JSONL rows are whatever the line holds (a non-object is for the caller to refuse); CSV
        cells are strings (a missing cell is None); Parquet and Arrow cells are Python values."""
        self.bytes_read = 0
        try:
            if self.kind == "parquet":
                yield from self._parquet_records()
            elif self.kind == "arrow":
                yield from self._arrow_records()
            else:
                with self._open() as stream:
                    reader = _csv_records if self.kind == "csv" else _jsonl_records
                    for record in reader(stream, filename=self.filename, max_line_bytes=max_line_bytes):
                        self.bytes_read = stream.tell()
                        yield record
        except SourceError as error:
            yield 0, None, [LineProblem(self.filename, 0, "", str(error))]

    def _parquet_records(self) -> Iterator[Record]:
        import pyarrow
        import pyarrow.parquet as parquet

        with self._open() as stream:
            try:
                table = parquet.ParquetFile(stream)
            except (pyarrow.ArrowException, OSError) as error:
                raise SourceError(f"not a Parquet file ({error})") from None
            for index in range(table.metadata.num_row_groups):
                # A small compressed file can hold a huge table: refuse before decompressing it.
                unpacked = table.metadata.row_group(index).total_byte_size
                if unpacked > MAX_ROW_GROUP_BYTES:
                    raise SourceError(
                        f"row group {index + 1} is {unpacked:,} bytes uncompressed; the limit is "
                        f"{MAX_ROW_GROUP_BYTES:,}: write the file with smaller row groups (row_group_size)"
                    )
            total, number = table.metadata.num_rows or 1, 0
            size = self.size_bytes
            for batch in table.iter_batches(batch_size=ROW_BATCH):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row, []
                self.bytes_read = int(size * min(1.0, number / total))

    def _arrow_records(self) -> Iterator[Record]:
        number, done = 0, 0
        for path in self._arrow_files():
            with self._open(path) as stream:
                for batch in _arrow_batches(stream):
                    for row in batch.to_pylist():
                        number += 1
                        yield number, row, []
                    self.bytes_read = done + stream.tell()
                done += stream.seek(0, io.SEEK_END)  # the file format's footer is read, not walked through
                self.bytes_read = done

    def columns(self, *, max_line_bytes: int) -> list[str]:
        """The columns, in file order: a table's schema, a CSV header, or the keys of a JSONL file's
        first rows. Raises SourceError when the file cannot be read."""
        if self.kind == "parquet":
            import pyarrow
            import pyarrow.parquet as parquet

            with self._open() as stream:
                try:
                    return list(parquet.ParquetFile(stream).schema_arrow.names)
                except (pyarrow.ArrowException, OSError) as error:
                    raise SourceError(f"not a Parquet file ({error})") from None
        if self.kind == "arrow":
            with self._open(self._arrow_files()[0]) as stream:
                return list(_arrow_reader(stream).schema.names)
        if self.kind == "csv":
            with self._open() as stream:
                text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
                try:
                    return [name for name in next(csv.reader(text), []) if name]
                except (csv.Error, UnicodeDecodeError) as error:
                    raise SourceError(f"the header is not readable CSV ({error})") from None
                finally:
                    text.detach()
        names: dict[str, None] = {}
        for count, (_, row, _) in enumerate(self.records(max_line_bytes=max_line_bytes)):
            if isinstance(row, dict):
                names.update(dict.fromkeys(str(name) for name in row))
            if count + 1 >= COLUMN_SAMPLE_ROWS:
                break
        return list(names)

    def first_rows(self, count: int, *, max_line_bytes: int) -> list[tuple[int, dict]]:
        """The first `count` readable rows, with their numbers (for a preview)."""
        return self.first_rows_and_problems(count, max_line_bytes=max_line_bytes)[0]

    def first_rows_and_problems(
        self, count: int, *, max_line_bytes: int
    ) -> tuple[list[tuple[int, dict]], list[LineProblem]]:
        """`first_rows`, and the problems of the lines passed over on the way (not JSON, too long...)."""
        rows, skipped = [], []
        for number, row, problems in self.records(max_line_bytes=max_line_bytes):
            if isinstance(row, dict) and not problems:
                rows.append((number, row))
            else:
                skipped.extend(problems or [LineProblem(self.filename, number, "", "not an object with columns")])
            if len(rows) >= count:
                break
        return rows, skipped


def _arrow_reader(stream: IO[bytes]):
    """An Arrow IPC reader for the file format (Feather v2) or the stream format (`datasets`)."""
    import pyarrow
    import pyarrow.ipc as ipc

    try:
        return ipc.open_file(stream)
    except pyarrow.ArrowInvalid:
        stream.seek(0)
    try:
        return ipc.open_stream(stream)
    except (pyarrow.ArrowException, OSError) as error:
        raise SourceError(f"not an Arrow file ({error})") from None


def _arrow_batches(stream: IO[bytes]):
    reader = _arrow_reader(stream)
    if hasattr(reader, "num_record_batches"):  # the file format: batches by index
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)
    else:
        yield from reader


def _raw_lines(stream: IO[bytes], *, max_line_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, bytes without the newline or None when over the limit, its length)."""
    number = 0
    while True:
        raw = stream.readline(max_line_bytes + 2)
        if not raw:
            return
        number += 1
        length = len(raw)
        if not raw.endswith(b"\n") and length > max_line_bytes:
            # Over the limit: skip the rest of this line without holding it.
            while True:
                rest = stream.readline(READ_CHUNK)
                length += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, None, length
            continue
        yield number, raw.rstrip(b"\n").rstrip(b"\r"), length


def _jsonl_records(stream: IO[bytes], *, filename: str, max_line_bytes: int) -> Iterator[Record]:
    for number, raw, length in _raw_lines(stream, max_line_bytes=max_line_bytes):

        def problem(reason: str, number: int = number) -> Record:
            return number, None, [LineProblem(filename, number, "", reason)]

        if raw is None:
            yield problem(f"line is {length:,} bytes; the limit is {max_line_bytes:,}")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            yield problem(f"not UTF-8 text (byte {error.start + 1}); save the file as UTF-8")
            continue
        if number == 1:
            text = text.removeprefix("\ufeff")
        if not text.strip():
            continue
        try:
            yield number, json.loads(text), []
        except json.JSONDecodeError as error:
            yield problem(f"not valid JSON: {error.msg.removesuffix(' at')} at column {error.colno}")
        except RecursionError:
            yield problem("not valid JSON: nested too deeply")


def _csv_records(stream: IO[bytes], *, filename: str, max_line_bytes: int) -> Iterator[Record]:
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    csv.field_size_limit(max_line_bytes)
    reader = csv.DictReader(text)
    try:
        for row in reader:
            number = reader.line_num
            if None in row:
                yield number, None, [LineProblem(filename, number, "", "more values than header columns")]
                continue
            yield number, row, []
    except csv.Error as error:
        yield reader.line_num, None, [LineProblem(filename, reader.line_num, "", f"not valid CSV: {error}")]
    except UnicodeDecodeError as error:
        reason = f"not UTF-8 text (byte {error.start + 1} of a block); save the file as UTF-8"
        yield reader.line_num + 1, None, [LineProblem(filename, reader.line_num + 1, "", reason)]
    finally:
        text.detach()  # leave the caller's stream open
