"""A valid single-module plug-in: one counter, a tool that adds to it and one that never returns."""

import json

TABLES = ("counters",)
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add to the counter.",
            "parameters": {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
        },
    },
    {"type": "function", "function": {"name": "spin", "parameters": {"type": "object", "properties": {}}}},
]


def add(world, *, amount):
    if not isinstance(amount, int):
        raise ValueError("amount must be an integer")
    world["value"] += amount
    return {"value": world["value"]}


def spin(world):
    while True:
        pass


TOOLS = {"add": add, "spin": spin}
STATE_CHECKS = {"broken": lambda state: state["no such table"]}


def reset(seed):
    return {"value": seed}


def snapshot(world):
    return {"counters": [{"id": 1, "value": world["value"]}]}


def dump(world):
    return json.dumps(world).encode()


def load(data):
    return json.loads(data)
