"""Its tool code needs a package the sandbox does not have."""

import json

import httpx  # noqa: F401

TABLES = ("counters",)
TOOL_SCHEMAS = [{"type": "function", "function": {"name": "fetch", "parameters": {"type": "object"}}}]
TOOLS = {"fetch": lambda world: {}}


def reset(seed):
    return {}


def snapshot(world):
    return {"counters": []}


def dump(world):
    return json.dumps(world).encode()


def load(data):
    return json.loads(data)
