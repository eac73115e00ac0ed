"""`sheet`: a spreadsheet of numbered cells (A1, A2, ... B1 ...) held in memory, one instance per episode."""

import builtins
import os

import pandas

TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "get_cell",
            "description": "Read one cell, e.g. A1.",
            "parameters": {"type": "object", "properties": {"cell": {"type": "string"}}, "required": ["cell"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "set_cell",
            "description": "Write a number into one cell.",
            "parameters": {
                "type": "object",
                "properties": {"cell": {"type": "string"}, "value": {"type": "number"}},
                "required": ["cell", "value"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "sum_column",
            "description": "The sum of every number in a column, e.g. A.",
            "parameters": {"type": "object", "properties": {"column": {"type": "string"}}, "required": ["column"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "render",
            "description": "The whole sheet as a text table, one row per cell.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {"type": "function", "function": {"name": "crash", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "hog", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "stall", "parameters": {"type": "object", "properties": {}}}},
    {
        "type": "function",
        "function": {
            "name": "peek",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
]


def _cell(cell):
    if not isinstance(cell, str) or len(cell) < 2 or not cell[0].isalpha() or not cell[1:].isdigit():
        raise ValueError(f"{cell!r} is not a cell: write a column letter and a row number, e.g. A1")
    return cell.upper()


def at_least(state, cell, minimum):
    """A state check: `cell` holds at least `minimum`."""
    values = {row["id"]: row["value"] for row in state["cells"]}
    return None if values.get(cell, 0) >= minimum else f"{cell} is {values.get(cell)}, below {minimum}"


class SheetWorld:
    TABLES = ("cells",)
    TOOL_SCHEMAS = TOOL_SCHEMAS
    DEPENDENCIES = ("pandas",)  # installed beside Passband, mounted read-only
    REQUIREMENTS = "requirements.lock"  # installed hash-pinned into the plug-in's own environment
    STATE_CHECKS = {"at_least": at_least}
    MEMORY_MB = 768
    RESET_SECONDS = 20

    def reset(self, seed):
        if seed == 13:
            raise RuntimeError("no sheet for seed 13")
        while seed == 14:  # a reset that never returns
            pass
        self.cells = {"A1": seed, "A2": seed * 2, "A3": 7}

    def get_cell(self, cell):
        return {"cell": _cell(cell), "value": self.cells.get(_cell(cell))}

    def set_cell(self, cell, value):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError("value must be a number")
        self.cells[_cell(cell)] = value
        return {"cell": _cell(cell), "value": value}

    def sum_column(self, column):
        if not isinstance(column, str) or not column.isalpha():
            raise ValueError(f"{column!r} is not a column letter")
        column = column.upper()
        frame = pandas.DataFrame([{"cell": name, "value": value} for name, value in self.cells.items()])
        in_column = frame[frame["cell"].str.match(f"^{column}[0-9]+$")]
        return {"column": column, "sum": float(in_column["value"].sum()) if len(in_column) else 0.0}

    def render(self):
        import texttable  # from the lock: it exists only in the sandbox, so imported where it is used

        table = texttable.Texttable()
        table.add_rows([["cell", "value"], *([name, self.cells[name]] for name in sorted(self.cells))])
        return {"table": table.draw(), "texttable": texttable.__file__}

    def crash(self):
        os._exit(3)

    def stall(self):
        while True:
            pass

    def hog(self):
        return {"bytes": len(bytearray(4 << 30))}

    def peek(self, path):
        """What this process can see: a file's first bytes, its environment variables, Passband's packages."""
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(200)
        except OSError as error:
            text = f"{type(error).__name__}"
        found = {}
        for name in ("dj" + "ango", "eng" + "ine"):  # spelled so that discovery's import check lets it by
            try:
                found[name] = getattr(builtins, "__imp" + "ort__")(name).__name__
            except ImportError as error:
                found[name] = f"ImportError: {error}"
        return {"text": text, "environment": dict(os.environ), "imports": found}

    def snapshot(self):
        return {"cells": [{"id": name, "value": self.cells[name]} for name in sorted(self.cells)]}
