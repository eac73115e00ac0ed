"""The tools' OpenAI function schemas: what the model is told it may call."""

from __future__ import annotations

from typing import Any

from .schema import CREATABLE, POLICY_LIMITS, TABLES, UPDATABLE

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
