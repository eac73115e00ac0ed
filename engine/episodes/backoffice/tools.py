"""The tools themselves: search, read, create and update records, submit expense reports; and
`call_tool`, which runs one call and turns every refusal or failure into an observation."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from .fields import ToolError, bad_arguments, checked_id, checked_table, checked_text, clean_fields, fetch_row
from .schema import COLUMNS, CREATABLE, POLICY_LIMITS, TABLES, UPDATABLE
from .tool_schemas import TOOL_NAMES, TOOL_SCHEMAS

SEARCH_LIMIT = 20


def search_records(connection: sqlite3.Connection, *, table: Any, query: Any = "", filters: Any = None) -> dict:
    table = checked_table(table, TABLES)
    columns = COLUMNS[table]
    if query is None:
        query = ""
    if not isinstance(query, str):
        raise bad_arguments("query must be a string")
    filters = filters or {}
    if not isinstance(filters, dict):
        raise bad_arguments("filters must be an object of field -> value")
    clauses, values = [], []
    for name, value in filters.items():
        if name not in columns:
            raise bad_arguments(f"{table} has no field {name!r}; fields: {', '.join(columns)}")
        clauses.append(
            f"lower(CAST({name} AS TEXT)) = lower(CAST(? AS TEXT))" if isinstance(value, str) else f"{name} = ?"
        )
        values.append(value)
    if query.strip():
        text_columns = [name for name in columns if name != "id"]
        clauses.append(
            "(" + " OR ".join(f"instr(lower(CAST({name} AS TEXT)), lower(?)) > 0" for name in text_columns) + ")"
        )
        values.extend([query.strip()] * len(text_columns))
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = connection.execute(
        f"SELECT {', '.join(columns)} FROM {table}{where} ORDER BY id LIMIT {SEARCH_LIMIT + 1}", values
    ).fetchall()
    found = [dict(zip(columns, row)) for row in rows[:SEARCH_LIMIT]]
    return {"rows": found, "count": len(found), "more": len(rows) > SEARCH_LIMIT}


def get_record(connection: sqlite3.Connection, *, table: Any, id: Any) -> dict:  # noqa: A002 - the schema's name
    table = checked_table(table, TABLES)
    record = fetch_row(connection, table, checked_id(id))
    if table == "expense_reports":
        record["items"] = search_records(connection, table="expense_items", filters={"report_id": record["id"]})["rows"]
    return record


def create_record(connection: sqlite3.Connection, *, table: Any, fields: Any) -> dict:
    table = checked_table(table, tuple(CREATABLE))
    cleaned = clean_fields(connection, table, fields, CREATABLE[table])
    defaults = {
        "customers": {"status": "active", "tier": "bronze"},
        "deals": {"stage": "prospect"},
        "contacts": {"phone": "", "title": ""},
    }.get(table, {})
    record = {**defaults, **cleaned}
    missing = [name for name in CREATABLE[table] if name not in record]
    if missing:
        raise bad_arguments(f"missing fields for a new {table} record: {', '.join(missing)}")
    names = list(record)
    cursor = connection.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
        [record[name] for name in names],
    )
    connection.commit()
    return {"created": table, "id": cursor.lastrowid}


def update_record(connection: sqlite3.Connection, *, table: Any, id: Any, fields: Any) -> dict:  # noqa: A002
    table = checked_table(table, tuple(UPDATABLE))
    record_id = checked_id(id)
    fetch_row(connection, table, record_id)
    cleaned = clean_fields(connection, table, fields, UPDATABLE[table])
    assignments = ", ".join(f"{name} = ?" for name in cleaned)
    connection.execute(f"UPDATE {table} SET {assignments} WHERE id = ?", [*cleaned.values(), record_id])
    connection.commit()
    return {"updated": table, "id": record_id, "record": fetch_row(connection, table, record_id)}


def submit_expense_report(connection: sqlite3.Connection, *, employee: Any, title: Any, items: Any) -> dict:
    employee = checked_text(employee, "employee")
    title = checked_text(title, "title")
    known = connection.execute("SELECT name FROM employees WHERE lower(name) = lower(?)", (employee,)).fetchone()
    if known is None:
        raise bad_arguments(f"no employee named {employee!r}")
    if not isinstance(items, list) or not items or len(items) > 20:
        raise bad_arguments("items must be a list of 1 to 20 {category, amount, description} objects")
    cleaned = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad_arguments(f"items[{index}] must be an object")
        category = item.get("category")
        if category not in POLICY_LIMITS:
            raise bad_arguments(f"items[{index}].category must be one of {', '.join(POLICY_LIMITS)}; got {category!r}")
        amount = item.get("amount")
        if isinstance(amount, str):
            try:
                amount = float(amount)
            except ValueError:
                pass
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount < 1e6:
            raise bad_arguments(f"items[{index}].amount must be a positive number; got {amount!r}")
        description = item.get("description") or ""
        if not isinstance(description, str):
            raise bad_arguments(f"items[{index}].description must be a string")
        cleaned.append((category, round(float(amount), 2), description[:200]))
    total = round(sum(amount for _, amount, _ in cleaned), 2)
    cursor = connection.execute(
        "INSERT INTO expense_reports (employee, title, status, total, review_note) VALUES (?, ?, 'submitted', ?, '')",
        (known[0], title, total),
    )
    report_id = cursor.lastrowid
    connection.executemany(
        "INSERT INTO expense_items (report_id, category, amount, description) VALUES (?, ?, ?, ?)",
        [(report_id, category, amount, description) for category, amount, description in cleaned],
    )
    connection.commit()
    return {"submitted": report_id, "total": total, "items": len(cleaned)}


TOOLS: dict[str, Callable[..., dict]] = {
    "search_records": search_records,
    "get_record": get_record,
    "create_record": create_record,
    "update_record": update_record,
    "submit_expense_report": submit_expense_report,
}


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """Required arguments present, no unknown ones (a small part of JSON Schema, enough here)."""
    parameters = next(schema["function"]["parameters"] for schema in TOOL_SCHEMAS if schema["function"]["name"] == name)
    missing = [key for key in parameters.get("required", []) if key not in arguments]
    if missing:
        raise bad_arguments(f"{name} needs the argument(s) {', '.join(missing)}")
    unknown = [key for key in arguments if key not in parameters["properties"]]
    if unknown:
        raise bad_arguments(
            f"{name} has no argument(s) {', '.join(unknown)}; it takes {', '.join(parameters['properties'])}"
        )


def call_tool(connection: sqlite3.Connection, name: Any, arguments: Any) -> dict[str, Any]:
    """Run one tool call; never raises. Returns {"status", "content"}: status "ok", "unknown_tool",
    "bad_arguments" or "tool_error"; content is the JSON text the model sees as the observation."""
    if name not in TOOLS:
        return {
            "status": "unknown_tool",
            "content": json.dumps({"error": f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}"}),
        }
    if not isinstance(arguments, dict):
        return {"status": "bad_arguments", "content": json.dumps({"error": "arguments must be a JSON object"})}
    try:
        _check_arguments(name, arguments)
        result = TOOLS[name](connection, **arguments)
    except ToolError as error:
        connection.rollback()
        return {"status": error.status, "content": json.dumps({"error": str(error)})}
    except Exception as error:  # noqa: BLE001 - a tool failure is an observation, not a crash
        connection.rollback()
        return {"status": "tool_error", "content": json.dumps({"error": f"{type(error).__name__}: {error}"})}
    return {"status": "ok", "content": json.dumps(result, sort_keys=True)}
