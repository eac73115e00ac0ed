"""The `backoffice` workflow environment: a small company back office held in SQLite.

Tables: employees, customers, contacts, deals, policies (expense limits per category),
expense_reports and expense_items. `reset(seed)` builds the same world for the same seed, byte
for byte; the tools in `TOOL_SCHEMAS` (OpenAI function schemas) search, read, create and update
records and submit expense reports; `snapshot(connection)` is the whole state as JSON, which the
`state_check` verifier reads.

This module is standard-library only and imports nothing of Passband, because it also runs as
the program of a sandbox run (see `engine/episodes/world.py`): there it reads one request
as JSON on stdin (the database as bytes, a tool name and the model's arguments) and writes the
observation and the new database on stdout. Model input only ever reaches it as data: every SQL
statement here is parameterised, and table and column names come from fixed lists.
"""

from __future__ import annotations

import base64
import json
import random
import sqlite3
import sys
from typing import Any

ENVIRONMENT = "backoffice"

SCHEMA = """
CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT NOT NULL, department TEXT NOT NULL,
                        email TEXT NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, industry TEXT NOT NULL,
                        tier TEXT NOT NULL, country TEXT NOT NULL, account_manager TEXT NOT NULL,
                        status TEXT NOT NULL);
CREATE TABLE contacts (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                       name TEXT NOT NULL, email TEXT NOT NULL, phone TEXT NOT NULL, title TEXT NOT NULL);
CREATE TABLE deals (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                    title TEXT NOT NULL, amount REAL NOT NULL, stage TEXT NOT NULL, close_date TEXT NOT NULL);
CREATE TABLE policies (id INTEGER PRIMARY KEY, category TEXT NOT NULL UNIQUE, limit_amount REAL NOT NULL,
                       rule TEXT NOT NULL);
CREATE TABLE expense_reports (id INTEGER PRIMARY KEY, employee TEXT NOT NULL, title TEXT NOT NULL,
                              status TEXT NOT NULL, total REAL NOT NULL, review_note TEXT NOT NULL);
CREATE TABLE expense_items (id INTEGER PRIMARY KEY, report_id INTEGER NOT NULL REFERENCES expense_reports(id),
                            category TEXT NOT NULL, amount REAL NOT NULL, description TEXT NOT NULL);
"""

TABLES = ("employees", "customers", "contacts", "deals", "policies", "expense_reports", "expense_items")
COLUMNS: dict[str, tuple[str, ...]] = {
    "employees": ("id", "name", "department", "email"),
    "customers": ("id", "name", "industry", "tier", "country", "account_manager", "status"),
    "contacts": ("id", "customer_id", "name", "email", "phone", "title"),
    "deals": ("id", "customer_id", "title", "amount", "stage", "close_date"),
    "policies": ("id", "category", "limit_amount", "rule"),
    "expense_reports": ("id", "employee", "title", "status", "total", "review_note"),
    "expense_items": ("id", "report_id", "category", "amount", "description"),
}
# What the tools may write: (table -> columns). Employees and policies are read-only.
CREATABLE: dict[str, tuple[str, ...]] = {
    "customers": ("name", "industry", "tier", "country", "account_manager", "status"),
    "contacts": ("customer_id", "name", "email", "phone", "title"),
    "deals": ("customer_id", "title", "amount", "stage", "close_date"),
}
UPDATABLE: dict[str, tuple[str, ...]] = {
    "customers": ("name", "industry", "tier", "country", "account_manager", "status"),
    "contacts": ("customer_id", "name", "email", "phone", "title"),
    "deals": ("customer_id", "title", "amount", "stage", "close_date"),
    "expense_reports": ("status", "review_note"),
}
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("customers", "tier"): ("bronze", "silver", "gold"),
    ("customers", "status"): ("active", "churned"),
    ("deals", "stage"): ("prospect", "negotiation", "won", "lost"),
    ("expense_reports", "status"): ("submitted", "approved", "rejected"),
}
NUMERIC = {("deals", "amount"), ("deals", "customer_id"), ("contacts", "customer_id")}
SEARCH_LIMIT = 20

FIRST_NAMES = (
    "Ana",
    "Bilal",
    "Chen",
    "Dana",
    "Eitan",
    "Fatima",
    "Goran",
    "Hana",
    "Ivo",
    "Jun",
    "Kofi",
    "Lena",
    "Mateo",
    "Nia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sami",
    "Tove",
    "Umar",
    "Vera",
    "Wen",
    "Yusuf",
)
LAST_NAMES = (
    "Abara",
    "Berg",
    "Costa",
    "Dahl",
    "Egan",
    "Fischer",
    "Gupta",
    "Holm",
    "Ito",
    "Jansen",
    "Kim",
    "Lopez",
    "Moreau",
    "Novak",
    "Okafor",
    "Park",
    "Quinn",
    "Rossi",
    "Sato",
    "Tanaka",
    "Varga",
    "Weber",
)
COMPANIES = (
    "Acme Tools",
    "Birch Analytics",
    "Cobalt Freight",
    "Delta Dental Group",
    "Evergreen Foods",
    "Fjord Energy",
    "Granite Bank",
    "Harbor Logistics",
    "Iris Biotech",
    "Juniper Retail",
    "Kestrel Air",
    "Lumen Media",
    "Maple Insurance",
    "Nimbus Cloud",
    "Orchid Hotels",
    "Pioneer Mining",
)
INDUSTRIES = ("manufacturing", "software", "logistics", "healthcare", "food", "energy", "finance", "retail")
COUNTRIES = ("Germany", "France", "Japan", "Brazil", "Canada", "Kenya", "India", "Sweden")
DEPARTMENTS = ("sales", "engineering", "finance", "support")
TITLES = ("CFO", "Head of Procurement", "IT Director", "Operations Manager", "CEO", "Buyer")
PRODUCTS = (
    "Platform licence",
    "Support renewal",
    "Onboarding package",
    "Data add-on",
    "Training days",
    "Hardware refresh",
)
POLICY_LIMITS = {
    "meals": ((50, 60, 75), "Meals are reimbursed up to {limit} per item; claim the limit for anything above."),
    "lodging": ((180, 220, 250), "Hotel nights are reimbursed up to {limit} per night-item."),
    "travel": ((400, 500, 650), "Flights and trains are reimbursed up to {limit} per item."),
    "taxi": ((40, 60, 80), "Taxis and ride shares are reimbursed up to {limit} per item."),
    "office_supplies": ((100, 150), "Office supplies are reimbursed up to {limit} per item."),
}


class ToolError(Exception):
    """A tool refused its call; `status` is "bad_arguments" or "tool_error", the message says why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _bad(message: str) -> ToolError:
    return ToolError("bad_arguments", message)


# -- the world ----------------------------------------------------------------------------------


def reset(seed: int) -> sqlite3.Connection:
    """A fresh in-memory world for `seed`; the same seed always gives the same rows."""
    rng = random.Random(f"backoffice:{int(seed)}")
    connection = sqlite3.connect(":memory:")
    connection.executescript(SCHEMA)
    people = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    rng.shuffle(people)
    employees = people[:8]
    for index, name in enumerate(employees, start=1):
        connection.execute(
            "INSERT INTO employees VALUES (?, ?, ?, ?)",
            (index, name, DEPARTMENTS[index % len(DEPARTMENTS)], _email(name, "passband-corp.example")),
        )
    companies = list(COMPANIES)
    rng.shuffle(companies)
    contact_id = deal_id = 0
    people_left = people[8:]
    for customer_id, company in enumerate(companies[:12], start=1):
        connection.execute(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                customer_id,
                company,
                rng.choice(INDUSTRIES),
                rng.choice(("bronze", "silver", "gold")),
                rng.choice(COUNTRIES),
                rng.choice(employees[:4]),
                "active" if rng.random() < 0.85 else "churned",
            ),
        )
        domain = company.lower().replace(" ", "") + ".example"
        for _ in range(rng.randint(1, 3)):
            contact_id += 1
            name = people_left.pop()
            connection.execute(
                "INSERT INTO contacts VALUES (?, ?, ?, ?, ?, ?)",
                (
                    contact_id,
                    customer_id,
                    name,
                    _email(name, domain),
                    f"+1-555-{rng.randint(1000, 9999)}",
                    rng.choice(TITLES),
                ),
            )
        for product in rng.sample(PRODUCTS, rng.randint(1, 3)):
            deal_id += 1
            connection.execute(
                "INSERT INTO deals VALUES (?, ?, ?, ?, ?, ?)",
                (
                    deal_id,
                    customer_id,
                    product,
                    float(rng.randint(10, 900) * 100),
                    rng.choice(("prospect", "negotiation", "negotiation", "won", "lost")),
                    f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                ),
            )
    for policy_id, (category, (limits, rule)) in enumerate(POLICY_LIMITS.items(), start=1):
        limit = float(rng.choice(limits))
        connection.execute(
            "INSERT INTO policies VALUES (?, ?, ?, ?)", (policy_id, category, limit, rule.format(limit=f"{limit:g}"))
        )
    item_id = 0
    for report_id in range(1, 7):
        employee = rng.choice(employees)
        items = [
            (category, float(rng.randint(2, 60) * 5), rng.choice(("client visit", "conference", "team offsite")))
            for category in rng.sample(list(POLICY_LIMITS), rng.randint(1, 3))
        ]
        connection.execute(
            "INSERT INTO expense_reports VALUES (?, ?, ?, ?, ?, ?)",
            (report_id, employee, f"Trip {report_id}", "submitted", sum(item[1] for item in items), ""),
        )
        for category, amount, description in items:
            item_id += 1
            connection.execute(
                "INSERT INTO expense_items VALUES (?, ?, ?, ?, ?)", (item_id, report_id, category, amount, description)
            )
    connection.commit()
    return connection


def _email(name: str, domain: str) -> str:
    return name.lower().replace(" ", ".") + "@" + domain


def snapshot(connection: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """Every table as a list of row objects ordered by id: the state the verifier checks."""
    state: dict[str, list[dict[str, Any]]] = {}
    for table in TABLES:
        columns = COLUMNS[table]
        rows = connection.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY id").fetchall()
        state[table] = [dict(zip(columns, row)) for row in rows]
    return state


def dump(connection: sqlite3.Connection) -> bytes:
    """The database as bytes (SQLite's own format), to carry between sandbox runs."""
    return connection.serialize()


def load(data: bytes) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.deserialize(data)
    return connection


# -- tools ----------------------------------------------------------------------------------------

_TABLE_ENUM = list(TABLES)
TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_records",
            "description": "Search one table. Rows whose text fields contain `query` (case-insensitive) and whose "
            "fields equal every value in `filters`. Returns at most 20 rows.",
            "parameters": {
                "type": "object",
                "properties": {
                    "table": {"type": "string", "enum": _TABLE_ENUM},
                    "query": {"type": "string", "description": "Text to look for; empty matches every row."},
                    "filters": {"type": "object", "description": 'Field -> exact value, e.g. {"customer_id": 3}.'},
                },
                "required": ["table"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_record",
            "description": "Read one record by id. An expense report comes with its items.",
            "parameters": {
                "type": "object",
                "properties": {"table": {"type": "string", "enum": _TABLE_ENUM}, "id": {"type": "integer"}},
                "required": ["table", "id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_record",
            "description": "Create a customer, contact or deal. Returns the new id.",
            "parameters": {
                "type": "object",
                "properties": {
                    "table": {"type": "string", "enum": list(CREATABLE)},
                    "fields": {"type": "object", "description": "Field -> value for the new record."},
                },
                "required": ["table", "fields"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "update_record",
            "description": "Change fields of a customer, contact, deal, or the status/review_note of an expense "
            "report (approve or reject it).",
            "parameters": {
                "type": "object",
                "properties": {
                    "table": {"type": "string", "enum": list(UPDATABLE)},
                    "id": {"type": "integer"},
                    "fields": {"type": "object", "description": "Field -> new value."},
                },
                "required": ["table", "id", "fields"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit_expense_report",
            "description": "File a new expense report for an employee. Amounts must follow the expense policies "
            "(table policies).",
            "parameters": {
                "type": "object",
                "properties": {
                    "employee": {"type": "string", "description": "The employee's full name."},
                    "title": {"type": "string"},
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "category": {"type": "string", "enum": list(POLICY_LIMITS)},
                                "amount": {"type": "number"},
                                "description": {"type": "string"},
                            },
                            "required": ["category", "amount"],
                        },
                    },
                },
                "required": ["employee", "title", "items"],
            },
        },
    },
]
TOOL_NAMES = tuple(schema["function"]["name"] for schema in TOOL_SCHEMAS)


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 500:
        raise _bad(f"{name} must be a non-empty string of at most 500 characters")
    return value.strip()


def _table(value: Any, allowed: tuple[str, ...] | list[str]) -> str:
    if value not in allowed:
        raise _bad(f"table must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _record_id(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"id must be an integer; got {value!r}")
    return value


def _row(connection: sqlite3.Connection, table: str, record_id: int) -> dict[str, Any]:
    columns = COLUMNS[table]
    row = connection.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE id = ?", (record_id,)).fetchone()
    if row is None:
        raise _bad(f"no {table} record with id {record_id}")
    return dict(zip(columns, row))


def _clean_fields(connection: sqlite3.Connection, table: str, fields: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(fields, dict) or not fields:
        raise _bad("fields must be a non-empty object")
    cleaned: dict[str, Any] = {}
    for name, value in fields.items():
        if name not in allowed:
            raise _bad(f"{table}.{name} cannot be set; settable fields: {', '.join(allowed)}")
        if (table, name) in NUMERIC:
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    raise _bad(f"{name} must be a number; got {value!r}") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
                raise _bad(f"{name} must be a number >= 0; got {value!r}")
            value = int(value) if name.endswith("_id") else float(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        else:
            value = _text(value, name) if name != "review_note" else (value if isinstance(value, str) else None)
            if value is None:
                raise _bad("review_note must be a string")
        choices = CHOICES.get((table, name))
        if choices and value not in choices:
            raise _bad(f"{name} must be one of {', '.join(choices)}; got {value!r}")
        if name == "customer_id":
            _row(connection, "customers", value)
        cleaned[name] = value
    return cleaned


def search_records(connection: sqlite3.Connection, *, table: Any, query: Any = "", filters: Any = None) -> dict:
    table = _table(table, TABLES)
    columns = COLUMNS[table]
    if query is None:
        query = ""
    if not isinstance(query, str):
        raise _bad("query must be a string")
    filters = filters or {}
    if not isinstance(filters, dict):
        raise _bad("filters must be an object of field -> value")
    clauses, values = [], []
    for name, value in filters.items():
        if name not in columns:
            raise _bad(f"{table} has no field {name!r}; fields: {', '.join(columns)}")
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
    table = _table(table, TABLES)
    record = _row(connection, table, _record_id(id))
    if table == "expense_reports":
        record["items"] = search_records(connection, table="expense_items", filters={"report_id": record["id"]})["rows"]
    return record


def create_record(connection: sqlite3.Connection, *, table: Any, fields: Any) -> dict:
    table = _table(table, tuple(CREATABLE))
    cleaned = _clean_fields(connection, table, fields, CREATABLE[table])
    defaults = {
        "customers": {"status": "active", "tier": "bronze"},
        "deals": {"stage": "prospect"},
        "contacts": {"phone": "", "title": ""},
    }.get(table, {})
    record = {**defaults, **cleaned}
    missing = [name for name in CREATABLE[table] if name not in record]
    if missing:
        raise _bad(f"missing fields for a new {table} record: {', '.join(missing)}")
    names = list(record)
    cursor = connection.execute(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})",
        [record[name] for name in names],
    )
    connection.commit()
    return {"created": table, "id": cursor.lastrowid}


def update_record(connection: sqlite3.Connection, *, table: Any, id: Any, fields: Any) -> dict:  # noqa: A002
    table = _table(table, tuple(UPDATABLE))
    record_id = _record_id(id)
    _row(connection, table, record_id)
    cleaned = _clean_fields(connection, table, fields, UPDATABLE[table])
    assignments = ", ".join(f"{name} = ?" for name in cleaned)
    connection.execute(f"UPDATE {table} SET {assignments} WHERE id = ?", [*cleaned.values(), record_id])
    connection.commit()
    return {"updated": table, "id": record_id, "record": _row(connection, table, record_id)}


def submit_expense_report(connection: sqlite3.Connection, *, employee: Any, title: Any, items: Any) -> dict:
    employee = _text(employee, "employee")
    title = _text(title, "title")
    known = connection.execute("SELECT name FROM employees WHERE lower(name) = lower(?)", (employee,)).fetchone()
    if known is None:
        raise _bad(f"no employee named {employee!r}")
    if not isinstance(items, list) or not items or len(items) > 20:
        raise _bad("items must be a list of 1 to 20 {category, amount, description} objects")
    cleaned = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(f"items[{index}] must be an object")
        category = item.get("category")
        if category not in POLICY_LIMITS:
            raise _bad(f"items[{index}].category must be one of {', '.join(POLICY_LIMITS)}; got {category!r}")
        amount = item.get("amount")
        if isinstance(amount, str):
            try:
                amount = float(amount)
            except ValueError:
                pass
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount < 1e6:
            raise _bad(f"items[{index}].amount must be a positive number; got {amount!r}")
        description = item.get("description") or ""
        if not isinstance(description, str):
            raise _bad(f"items[{index}].description must be a string")
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


TOOLS = {
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
        raise _bad(f"{name} needs the argument(s) {', '.join(missing)}")
    unknown = [key for key in arguments if key not in parameters["properties"]]
    if unknown:
        raise _bad(f"{name} has no argument(s) {', '.join(unknown)}; it takes {', '.join(parameters['properties'])}")


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


def sandbox_main() -> None:
    """One sandbox run: {"seed", "database" (base64, or null to reset), "tool", "arguments"} on stdin;
    {"status", "content", "database"} on stdout, plus "state" when "want_state" was set."""
    request = json.loads(sys.stdin.read())
    if request.get("database"):
        connection = load(base64.b64decode(request["database"]))
    else:
        connection = reset(int(request["seed"]))
    reply: dict[str, Any] = {"status": "ok", "content": ""}
    if request.get("tool") is not None:
        reply = call_tool(connection, request["tool"], request.get("arguments"))
    reply["database"] = base64.b64encode(dump(connection)).decode("ascii")
    if request.get("want_state"):
        reply["state"] = snapshot(connection)
    sys.stdout.write(json.dumps(reply))


if __name__ == "__main__":
    sandbox_main()
