"""The back office's tables: their SQL, their columns, what the tools may write, and the state as JSON."""

from __future__ import annotations

import sqlite3
from typing import Any

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
# The expense policy's categories: (the limits a world may draw, the rule text).
POLICY_LIMITS = {
    "meals": ((50, 60, 75), "Meals are reimbursed up to {limit} per item; claim the limit for anything above."),
    "lodging": ((180, 220, 250), "Hotel nights are reimbursed up to {limit} per night-item."),
    "travel": ((400, 500, 650), "Flights and trains are reimbursed up to {limit} per item."),
    "taxi": ((40, 60, 80), "Taxis and ride shares are reimbursed up to {limit} per item."),
    "office_supplies": ((100, 150), "Office supplies are reimbursed up to {limit} per item."),
}


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
