"""A plug-in whose lock (REQUIREMENTS) names a requirement without its version pinned or its hash."""

import json

TABLES = ("notes",)
REQUIREMENTS = "bad_lock.txt"
TOOL_SCHEMAS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}]


def read(world):
    return {"notes": world["notes"]}


TOOLS = {"read": read}


def reset(seed):
    return {"notes": [{"id": 1, "text": str(seed)}]}


def snapshot(world):
    return world


def dump(world):
    return json.dumps(world).encode()


def load(data):
    return json.loads(data)
