"""Six inventory tasks in Passband's task import format (for Passband's tests and demos): ship an
order that stock covers, restock then ship one that it does not, move an item to another bin. Each
reference answer is the list of tool calls that solves it."""

from __future__ import annotations

import json
from typing import Any

from . import STATE_CHECKS, TOOL_SCHEMAS, reset, snapshot
from .world import BINS

SYSTEM_PROMPT = "You run the warehouse through its tools. Do what the request asks, then reply with one short sentence."


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _task(
    key: str, seed: int, request: str, calls: list[dict[str, Any]], checks: list[dict[str, Any]]
) -> dict[str, Any]:
    assert all(check.get("check") in STATE_CHECKS for check in checks if "check" in check)
    return {
        "key": key,
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": request}],
        "answer": json.dumps(calls),
        "verifier": {"kind": "state_check", "environment": "inventory", "seed": seed, "checks": checks},
        "tools": TOOL_SCHEMAS,
        "domain": "workflow",
    }


def inventory_tasks() -> list[dict[str, Any]]:
    tasks = []
    for seed in (11, 12):
        state = snapshot(reset(seed))
        stock = {row["sku"]: row["stock"] for row in state["items"]}
        covered = next(row for row in state["orders"] if stock[row["sku"]] >= row["quantity"])
        tasks.append(
            _task(
                f"inventory-ship-{seed}",
                seed,
                f"Ship order #{covered['id']}.",
                [_call("ship_order", id=covered["id"])],
                [
                    {"table": "orders", "where": {"id": covered["id"]}, "expect": {"status": "shipped"}},
                    {"check": "stock_moved", "arguments": {"sku": covered["sku"], "delta": -covered["quantity"]}},
                    {"check": "no_negative_stock"},
                ],
            )
        )
        short = max(state["orders"], key=lambda row: row["quantity"] - stock[row["sku"]])
        missing = max(short["quantity"] - stock[short["sku"]], 0) + 5
        tasks.append(
            _task(
                f"inventory-restock-{seed}",
                seed,
                f"A delivery of {missing} units of {short['sku']} arrived (reason: delivery). Book it into stock, "
                f"then ship order #{short['id']}.",
                [
                    _call("adjust_stock", sku=short["sku"], delta=missing, reason="delivery"),
                    _call("ship_order", id=short["id"]),
                ],
                [
                    {"table": "orders", "where": {"id": short["id"]}, "expect": {"status": "shipped"}},
                    {"check": "stock_moved", "arguments": {"sku": short["sku"], "delta": missing}},
                    {"table": "orders", "where": {"status": "shipped"}, "count": 1},
                ],
            )
        )
        item = state["items"][seed % len(state["items"])]
        target = next(bin for bin in BINS if bin != item["bin"])
        tasks.append(
            _task(
                f"inventory-move-{seed}",
                seed,
                f"Move {item['name']} ({item['sku']}) to bin {target}.",
                [_call("move_item", sku=item["sku"], bin=target)],
                [
                    {
                        "table": "items",
                        "where": {"sku": item["sku"]},
                        "expect": {"bin": target, "stock": item["stock"]},
                    },
                    {"unchanged": ["orders", "movements"]},
                ],
            )
        )
    return tasks
