"""It forgot reset."""

from .counter import TABLES, TOOL_SCHEMAS, TOOLS, dump, load, snapshot  # noqa: F401
