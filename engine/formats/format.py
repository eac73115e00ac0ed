"""The interface every export format implements, built-in or installed: one ``ExportFormat`` object carrying
its row, its Parquet schema and its description, and the quality card every format's rows end with.

A *record* is a flat dict read from the database (releases.services.EXPORT_FIELDS): task key, environment,
version number and hash, content, the calibration under one probe model and the version's quality card. A
format turns one record into one row: ``fields(record)`` gives every column but the last, and ``row`` adds
``quality_card`` (engine/quality_card.py; null when the record was read without one), the one concern every
format carries the same way. Registration and discovery: engine/formats/registry.py; how to write one:
docs/formats.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from engine.quality_card import card_of, card_text

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# The Parquet column types a format's columns may have (engine/formats/files.py maps them to Arrow types):
# "messages" is a list of {role, content} chat messages, "calibration" the block `calibration_of` gives.
COLUMN_TYPES = ("text", "int64", "float64", "bool", "messages", "calibration")
CARD_COLUMN = "quality_card"


def json_text(value: Any) -> str:
    """Compact JSON with sorted keys: how JSON-shaped columns are written as text."""
    # orjson: the export's time goes mostly into JSON, and orjson is several times faster than json.
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def calibration_of(record: dict) -> dict | None:
    """The calibration block rows carry; None when the version was never probed by the model.

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


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per registered format
class ExportFormat:
    """One export format.

    name: the format's name (lowercase letters, digits, underscores): the file names ``<name>.jsonl`` and
        ``<name>.parquet``, the Hub folder's config, ``export --format``.
    description: one line for the dataset card: what a row holds, for which trainer.
    fields(record) -> dict: the row's columns, in order, without the quality card.
    columns: ((name, type), ...) for those columns, each type one of COLUMN_TYPES: the Parquet schema.
    json_fields: columns whose shape differs from task to task (verifier configs, tools, metadata): objects in
        JSONL, JSON text in Parquet (one Arrow type cannot hold them all).
    card_as_text: the quality card as JSON text in both files (for formats that carry every JSON field as text,
        so both files load into identical `datasets` features); else an object, like a json_field.
    hub_default: the Hub folder's default config.
    version: the format's version.
    """

    name: str
    description: str
    fields: Callable[[dict], dict]
    columns: tuple[tuple[str, str], ...]
    json_fields: tuple[str, ...] = ()
    card_as_text: bool = False
    hub_default: bool = False
    version: str = "1"

    def row(self, record: dict) -> dict:
        """One record in this format: its fields, then its quality card."""
        row = self.fields(record)
        card = card_of(record)
        row[CARD_COLUMN] = card_text(card) if self.card_as_text else card
        return row

    @property
    def json_columns(self) -> tuple[str, ...]:
        """The columns written as JSON text in Parquet, the quality card among them when it is an object."""
        return self.json_fields if self.card_as_text else (*self.json_fields, CARD_COLUMN)

    @property
    def column_names(self) -> tuple[str, ...]:
        """Every column of a row, in order, the quality card last."""
        return (*(name for name, _ in self.columns), CARD_COLUMN)


def format_problems(format: Any) -> list[str]:
    """What is wrong with a would-be format, as sentences that say what to fix; [] when well-formed."""
    if not isinstance(format, ExportFormat):
        return [f"is a {type(format).__name__}, not an engine.formats.format.ExportFormat"]
    problems = []
    if not isinstance(format.name, str) or not NAME_PATTERN.match(format.name):
        problems.append(f"name {format.name!r} must be lowercase letters, digits and underscores (at most 40)")
    if not callable(format.fields):
        problems.append("fields must be callable")
    if not isinstance(format.description, str) or not format.description.strip():
        problems.append("description must say in a line what a row holds")
    names = [column[0] for column in format.columns if isinstance(column, tuple) and len(column) == 2]
    if len(names) != len(format.columns) or not names:
        problems.append("columns must be a non-empty tuple of (name, type) pairs")
    unknown = [f"{name}: {kind}" for name, kind in format.columns if kind not in COLUMN_TYPES]
    if unknown:
        problems.append(f"column types must be one of {', '.join(COLUMN_TYPES)} ({'; '.join(unknown)})")
    if len(set(names)) != len(names) or CARD_COLUMN in names:
        problems.append(f"column names must be unique and leave out {CARD_COLUMN!r} (every row ends with it)")
    stray = [name for name in format.json_fields if name not in names]
    if stray:
        problems.append(f"json_fields {', '.join(stray)} are not columns")
    if not isinstance(format.version, str) or not format.version:
        problems.append("version must be a non-empty string")
    return problems
