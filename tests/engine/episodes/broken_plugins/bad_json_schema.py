"""Its tool's parameters are an object schema with an invalid property schema."""

from .counter import TABLES, dump, load, reset, snapshot  # noqa: F401

TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {"name": "add", "parameters": {"type": "object", "properties": {"amount": {"type": "integr"}}}},
    }
]
TOOLS = {"add": lambda world, **arguments: {}}
