"""What the tools accept: the model's arguments checked and cleaned before any SQL runs. Each refusal is a
`ToolError` whose message tells the model what to send instead."""

from __future__ import annotations

import sqlite3
from typing import Any

from .schema import CHOICES, COLUMNS, NUMERIC


class ToolError(Exception):
    """A tool refused its call; `status` is "bad_arguments" or "tool_error", the message says why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def bad_arguments(message: str) -> ToolError:
    return ToolError("bad_arguments", message)


def checked_text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 500:
        raise bad_arguments(f"{name} must be a non-empty string of at most 500 characters")
    return value.strip()


def checked_table(value: Any, allowed: tuple[str, ...] | list[str]) -> str:
    if value not in allowed:
        raise bad_arguments(f"table must be one of {', '.join(allowed)}; got {value!r}")
    return value


def checked_id(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_arguments(f"id must be an integer; got {value!r}")
    return value


def fetch_row(connection: sqlite3.Connection, table: str, record_id: int) -> dict[str, Any]:
    columns = COLUMNS[table]
    row = connection.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE id = ?", (record_id,)).fetchone()
    if row is None:
        raise bad_arguments(f"no {table} record with id {record_id}")
    return dict(zip(columns, row))


def clean_fields(connection: sqlite3.Connection, table: str, fields: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(fields, dict) or not fields:
        raise bad_arguments("fields must be a non-empty object")
    cleaned: dict[str, Any] = {}
    for name, value in fields.items():
        if name not in allowed:
            raise bad_arguments(f"{table}.{name} cannot be set; settable fields: {', '.join(allowed)}")
        if (table, name) in NUMERIC:
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    raise bad_arguments(f"{name} must be a number; got {value!r}") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
                raise bad_arguments(f"{name} must be a number >= 0; got {value!r}")
            value = int(value) if name.endswith("_id") else float(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        else:
            value = checked_text(value, name) if name != "review_note" else (value if isinstance(value, str) else None)
            if value is None:
                raise bad_arguments("review_note must be a string")
        choices = CHOICES.get((table, name))
        if choices and value not in choices:
            raise bad_arguments(f"{name} must be one of {', '.join(choices)}; got {value!r}")
        if name == "customer_id":
            fetch_row(connection, "customers", value)
        cleaned[name] = value
    return cleaned
