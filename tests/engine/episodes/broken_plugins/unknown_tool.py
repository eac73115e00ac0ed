"""Its schemas name a tool that TOOLS does not implement."""

from .counter import TABLES, TOOL_SCHEMAS, dump, load, reset, snapshot  # noqa: F401

TOOLS = {"subtract": lambda world, **arguments: {}}
