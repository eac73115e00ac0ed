"""The `backoffice` workflow environment: a small company back office held in SQLite.

Tables: employees, customers, contacts, deals, policies (expense limits per category),
expense_reports and expense_items (`schema`). `reset(seed)` builds the same world for the same seed,
byte for byte (`seed`); the tools in `TOOL_SCHEMAS` (OpenAI function schemas, `tool_schemas`) search,
read, create and update records and submit expense reports (`tools`, their arguments checked in
`fields`); `snapshot(connection)` is the whole state as JSON, which the `state_check` verifier reads.

This package is standard-library only and imports nothing of Passband outside itself (its modules
import each other relatively), because it also runs as the program of a sandbox run (see
`engine/episodes/world.py`, which bundles its modules into one program): there `sandbox_main` reads
one request as JSON on stdin (the database as bytes, a tool name and the model's arguments) and
writes the observation and the new database on stdout. Model input only ever reaches it as data:
every SQL statement here is parameterised, and table and column names come from fixed lists.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from .fields import ToolError
from .schema import COLUMNS, CREATABLE, POLICY_LIMITS, TABLES, UPDATABLE, dump, load, snapshot
from .seed import COMPANIES, COUNTRIES, DEPARTMENTS, FIRST_NAMES, LAST_NAMES, PRODUCTS, TITLES, reset
from .tool_schemas import TOOL_NAMES, TOOL_SCHEMAS
from .tools import TOOLS, call_tool

ENVIRONMENT = "backoffice"

__all__ = [
    "COLUMNS",
    "COMPANIES",
    "COUNTRIES",
    "CREATABLE",
    "DEPARTMENTS",
    "ENVIRONMENT",
    "FIRST_NAMES",
    "LAST_NAMES",
    "POLICY_LIMITS",
    "PRODUCTS",
    "TABLES",
    "TITLES",
    "TOOLS",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "UPDATABLE",
    "ToolError",
    "call_tool",
    "dump",
    "load",
    "reset",
    "sandbox_main",
    "snapshot",
]


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
