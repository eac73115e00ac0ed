"""Two tools share a name."""

from .counter import TABLES, TOOL_SCHEMAS, TOOLS, dump, load, reset, snapshot  # noqa: F401

TOOL_SCHEMAS = TOOL_SCHEMAS * 2
