"""A valid single-module plug-in: one counter, a tool that adds to it, one that never returns, and one that
reports what the process it runs in can see (environment variables, a TCP connection). Seed 13 cannot be
reset (it raises) and seed 14's reset never returns."""

import json
import os
import socket

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
    {
        "type": "function",
        "function": {
            "name": "look_around",
            "parameters": {"type": "object", "properties": {"port": {"type": "integer"}}},
        },
    },
]


def add(world, *, amount):
    if not isinstance(amount, int):
        raise ValueError("amount must be an integer")
    world["value"] += amount
    return {"value": world["value"]}


def spin(world):
    while True:
        pass


def look_around(world, *, port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        connected = True
    except OSError:
        connected = False
    return {"environment": sorted(os.environ), "connected": connected}


TOOLS = {"add": add, "spin": spin, "look_around": look_around}
STATE_CHECKS = {"broken": lambda state: state["no such table"]}


def reset(seed):
    if seed == 13:
        raise RuntimeError("no world for seed 13")
    while seed == 14:  # a reset that never returns
        pass
    return {"value": seed}


def snapshot(world):
    return {"counters": [{"id": 1, "value": world["value"]}]}


def dump(world):
    return json.dumps(world).encode()


def load(data):
    return json.loads(data)
