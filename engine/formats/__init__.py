"""Trainer formats: one task record in, one row per format out. Pure: no Django import.

Every format is one ``ExportFormat`` object (engine/formats/format.py: its row, schema and description, and
the quality card every row ends with) in a registry (engine/formats/registry.py): Passband's own
(``native``, ``trl``, ``verifiers``, ``nemo_gym``, one module each) and installed ones, through the entry
point group ``passband.formats``. Every format carries the task key, the version hash and the calibration,
so a trainer can seed a curriculum and trace any row back to the exact version it came from. The writers
(JSONL, Parquet) are engine/formats/files.py. See docs/formats.md.
"""

from engine.formats.files import (
    FILE_TYPES,
    arrow_schema,
    check_format,
    rows_of,
    sha256_of_file,
    write_file,
    write_jsonl,
    write_parquet,
)
from engine.formats.format import CARD_COLUMN, ExportFormat, calibration_of, json_text
from engine.formats.native import NATIVE_EXTRA_FIELDS
from engine.formats.nemo_gym import chat_tool, responses_tool
from engine.formats.registry import ExportFormatError, all_formats, format_named, names

__all__ = [
    "CARD_COLUMN",
    "FILE_TYPES",
    "NATIVE_EXTRA_FIELDS",
    "ExportFormat",
    "ExportFormatError",
    "all_formats",
    "arrow_schema",
    "calibration_of",
    "chat_tool",
    "check_format",
    "format_named",
    "json_text",
    "names",
    "responses_tool",
    "rows_of",
    "sha256_of_file",
    "write_file",
    "write_jsonl",
    "write_parquet",
]
