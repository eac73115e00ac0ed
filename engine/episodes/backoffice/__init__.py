"""The `backoffice` workflow environment: a small company back office held in SQLite.

Tables: employees, customers, contacts, deals, policies (expense limits per category),
expense_reports and expense_items (`schema`). `reset(seed)` builds the same world for the same seed,
byte for byte (`seed`); the tools in `TOOL_SCHEMAS` (OpenAI function schemas, `tool_schemas`) search,
read, create and update records and submit expense reports (`tools`, their arguments checked in
`fields`); `snapshot(connection)` is the whole state as JSON, which the `state_check` verifier reads.

It is an environment plug-in like any other (docs/environments.md): Passband's pyproject.toml declares
it under the entry point group `passband.environments`, and it follows the same contract. It is
standard-library only and imports nothing of Passband outside itself (its modules import each other
relatively), because its source is bundled into the program of a sandbox run (see
`engine/episodes/world.py`), where each tool call runs: the database travels between runs as the
bytes of `dump`. Model input only ever reaches it as data: every SQL statement here is
parameterised, and table and column names come from fixed lists.
"""

from __future__ import annotations

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
    "snapshot",
]
