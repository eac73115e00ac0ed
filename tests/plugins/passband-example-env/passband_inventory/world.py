"""The warehouse itself: plain Python lists, seeded, and the tools that act on them."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

TABLES = ("items", "orders", "movements")
BINS = ("A1", "A2", "B1", "B2", "C1", "C2")
PRODUCTS = ("bolt", "washer", "hinge", "bracket", "gasket", "spring", "valve", "clamp")

World = dict[str, list[dict[str, Any]]]


def reset(seed: int) -> World:
    """The same warehouse for the same seed: eight items, five open orders, an empty log."""
    rng = random.Random(seed)
    items = [
        {
            "id": index + 1,
            "sku": f"SKU-{100 + index}",
            "name": name,
            "stock": rng.randint(0, 30),
            "bin": rng.choice(BINS),
        }
        for index, name in enumerate(PRODUCTS)
    ]
    orders = [
        {"id": index + 1, "sku": rng.choice(items)["sku"], "quantity": rng.randint(1, 12), "status": "open"}
        for index in range(5)
    ]
    return {"items": items, "orders": orders, "movements": []}


def snapshot(world: World) -> World:
    return {table: copy.deepcopy(world[table]) for table in TABLES}


def dump(world: World) -> bytes:
    return json.dumps(world, sort_keys=True).encode("utf-8")


def load(data: bytes) -> World:
    return json.loads(data.decode("utf-8"))


def _item(world: World, sku: Any) -> dict[str, Any]:
    if not isinstance(sku, str):
        raise ValueError("sku must be a string such as 'SKU-101'")
    for row in world["items"]:
        if row["sku"].lower() == sku.strip().lower():
            return row
    raise ValueError(f"no item with sku {sku!r}")


def _log(world: World, *, sku: str, delta: int, reason: str) -> None:
    world["movements"].append({"id": len(world["movements"]) + 1, "sku": sku, "delta": delta, "reason": reason[:100]})


def find_items(world: World, *, query: Any = "") -> dict[str, Any]:
    if not isinstance(query, str):
        raise ValueError("query must be a string")
    needle = query.strip().lower()
    rows = [row for row in world["items"] if needle in row["name"] or needle in row["sku"].lower()]
    return {"items": rows}


def get_order(world: World, *, id: Any) -> dict[str, Any]:  # noqa: A002 - the schema's name
    if isinstance(id, bool) or not isinstance(id, int):
        raise ValueError("id must be an integer")
    for row in world["orders"]:
        if row["id"] == id:
            return {"order": row, "item": _item(world, row["sku"])}
    raise ValueError(f"no order #{id}")


def adjust_stock(world: World, *, sku: Any, delta: Any, reason: Any) -> dict[str, Any]:
    item = _item(world, sku)
    if isinstance(delta, bool) or not isinstance(delta, int) or delta == 0 or abs(delta) > 1000:
        raise ValueError("delta must be a non-zero integer between -1000 and 1000")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("reason must be a non-empty string")
    if item["stock"] + delta < 0:
        raise ValueError(f"{item['sku']} has {item['stock']} in stock; cannot remove {-delta}")
    item["stock"] += delta
    _log(world, sku=item["sku"], delta=delta, reason=reason.strip())
    return {"sku": item["sku"], "stock": item["stock"]}


def ship_order(world: World, *, id: Any) -> dict[str, Any]:  # noqa: A002
    found = get_order(world, id=id)
    order, item = found["order"], found["item"]
    if order["status"] != "open":
        raise ValueError(f"order #{order['id']} is {order['status']}, not open")
    if item["stock"] < order["quantity"]:
        raise ValueError(f"order #{order['id']} needs {order['quantity']} of {item['sku']}, {item['stock']} in stock")
    item["stock"] -= order["quantity"]
    order["status"] = "shipped"
    _log(world, sku=item["sku"], delta=-order["quantity"], reason=f"order #{order['id']}")
    return {"shipped": order["id"], "stock": item["stock"]}


def move_item(world: World, *, sku: Any, bin: Any) -> dict[str, Any]:  # noqa: A002
    item = _item(world, sku)
    if bin not in BINS:
        raise ValueError(f"bin must be one of {', '.join(BINS)}")
    item["bin"] = bin
    return {"sku": item["sku"], "bin": bin}


TOOLS = {
    "find_items": find_items,
    "get_order": get_order,
    "adjust_stock": adjust_stock,
    "ship_order": ship_order,
    "move_item": move_item,
}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_SKU = {"type": "string", "description": "The item's sku, e.g. SKU-101."}
TOOL_SCHEMAS = [
    _tool(
        "find_items",
        "Items whose name or sku contains the query (empty: all items).",
        {"query": {"type": "string"}},
        [],
    ),
    _tool("get_order", "One order by id, with its item.", {"id": {"type": "integer"}}, ["id"]),
    _tool(
        "adjust_stock",
        "Add (positive delta) or remove (negative) units of an item, with a reason; logged as a movement.",
        {"sku": _SKU, "delta": {"type": "integer"}, "reason": {"type": "string"}},
        ["sku", "delta", "reason"],
    ),
    _tool("ship_order", "Ship an open order: takes its quantity out of stock.", {"id": {"type": "integer"}}, ["id"]),
    _tool(
        "move_item",
        "Move an item to another bin.",
        {"sku": _SKU, "bin": {"type": "string", "enum": list(BINS)}},
        ["sku", "bin"],
    ),
]
