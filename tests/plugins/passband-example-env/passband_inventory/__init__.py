"""The `inventory` environment: a warehouse of items in bins, customer orders and a stock log.

This module is what the entry point names, and it is all Passband reads: the tools' OpenAI schemas
(`TOOL_SCHEMAS`) and implementations (`TOOLS`, each `function(world, **arguments) -> JSON value`),
the state's tables (`TABLES`), `reset(seed)`, `snapshot(world)`, `dump(world)` / `load(data)`
(the world as bytes between sandbox runs) and `STATE_CHECKS` for `state_check` verifiers.
Standard library only: Passband runs this package's source inside its sandbox, one tool call a run.
"""

from __future__ import annotations

from .world import BINS, TABLES, TOOL_SCHEMAS, TOOLS, dump, load, reset, snapshot

ENVIRONMENT = "inventory"


def _no_negative_stock(state: dict) -> str | None:
    below = [row["sku"] for row in state["items"] if row["stock"] < 0]
    return f"negative stock for {', '.join(below)}" if below else None


def _stock_moved(state: dict, *, sku: str, delta: int) -> str | None:
    """The log has exactly one movement of `delta` units for `sku`."""
    moved = [row for row in state["movements"] if row["sku"] == sku and row["delta"] == delta]
    return None if len(moved) == 1 else f"{len(moved)} movements of {delta:+d} for {sku}, expected 1"


STATE_CHECKS = {"no_negative_stock": _no_negative_stock, "stock_moved": _stock_moved}

__all__ = [
    "BINS",
    "ENVIRONMENT",
    "STATE_CHECKS",
    "TABLES",
    "TOOLS",
    "TOOL_SCHEMAS",
    "dump",
    "load",
    "reset",
    "snapshot",
]
