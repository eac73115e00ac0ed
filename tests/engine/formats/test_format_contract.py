"""The contract every registered export format meets, Passband's own and installed ones alike: it is well
formed, its rows have exactly its columns in order with the quality card last, and both files (JSONL and
Parquet) hold those rows under its schema. The registry keeps the built-ins whatever a package declares."""

import json
from decimal import Decimal
from importlib import metadata

import pytest

from engine import formats
from engine.formats import registry
from engine.formats.format import CARD_COLUMN, format_problems

TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
CALIBRATED = {
    "task_key": "tool-add",
    "environment": "arithmetic",
    "domain": "math",
    "status": "approved",
    "version": 2,
    "version_hash": "ab" * 32,
    "prompt": [{"role": "user", "content": "Add 2 and 2 with the tool."}],
    "answer": "4",
    "verifier": {"kind": "numeric", "abs_tol": 0.5},
    "tools": [TOOL],
    "metadata": {"source": "textbook"},
    "authoring_cost_usd": Decimal("0.0125"),
    "declared_difficulty": 2.0,
    "probe_model": "smollm2",
    "attempts": 8,
    "successes": 3,
    "pass_rate": 0.375,
    "interval_low": 0.1,
    "interval_high": 0.7,
    "band": "in_band",
    "predicted_probability": None,
    "grpo_signal": 0.23,
    "quality_card": {"schema": "1.0.0", "verifier": {"kind": "numeric"}},
}
UNPROBED = {
    **CALIBRATED,
    "task_key": "capital",
    "prompt": [{"role": "user", "content": "Capital of France?"}],
    "answer": "Paris",
    "verifier": {"kind": "exact", "ignore_case": True},
    "tools": None,
    "metadata": None,
    "authoring_cost_usd": None,
    "attempts": None,
    "quality_card": None,
}
RECORDS = [CALIBRATED, UNPROBED]
ENTRIES = registry.format_registry().entries()
IDS = [entry.item.name for entry in ENTRIES]


def test_the_builtins_come_first():
    assert formats.names()[:4] == registry.BUILTIN_FORMATS
    assert all(entry.builtin for entry in ENTRIES[:4])


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_each_format_is_well_formed_and_its_rows_have_its_columns(entry):
    format = entry.item
    assert format_problems(format) == []
    assert formats.format_named(format.name) is format
    for record in RECORDS:
        row = format.row(dict(record))
        assert tuple(row) == format.column_names
        assert list(row)[-1] == CARD_COLUMN
    card = format.row(dict(CALIBRATED))[CARD_COLUMN]
    assert (json.loads(card) if format.card_as_text else card) == CALIBRATED["quality_card"]
    assert format.row(dict(UNPROBED))[CARD_COLUMN] is None


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_each_format_writes_both_files_under_its_schema(entry, tmp_path):
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    format = entry.item
    jsonl, parquet = tmp_path / "rows.jsonl", tmp_path / "rows.parquet"
    assert formats.write_file(records=[dict(r) for r in RECORDS], format=format.name, file_type="jsonl", path=jsonl)
    assert formats.write_file(records=[dict(r) for r in RECORDS], format=format.name, file_type="parquet", path=parquet)
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    table = pyarrow_parquet.read_table(parquet)
    assert table.schema == formats.arrow_schema(format.name)
    assert [list(line) for line in lines] == [list(format.column_names)] * 2
    for line, stored in zip(lines, table.to_pylist(), strict=True):
        for column in format.json_columns:
            assert (None if stored[column] is None else json.loads(stored[column])) == line[column]


def test_an_unknown_format_is_refused_with_the_known_ones():
    with pytest.raises(formats.ExportFormatError, match="use one of native, trl, verifiers, nemo_gym"):
        formats.format_named("csv")


def _entry_point(name, value):
    return metadata.EntryPoint(name=name, value=value, group=registry.GROUP)


def test_a_stale_or_hostile_package_never_loses_a_builtin():
    built = registry.build(
        [
            _entry_point("trl", "engine.formats.native:FORMAT"),  # a built-in's name, taken again
            _entry_point("gone", "passband_uninstalled_formats:FORMAT"),  # metadata left by an uninstall
            _entry_point("odd", "engine.formats.format:COLUMN_TYPES"),  # not a format
        ]
    )
    assert built.names() == registry.BUILTIN_FORMATS
    refused = {item.name: item.error for item in built.refused()}
    assert set(refused) == {"trl", "gone", "odd"}
    assert "the entry point is named 'trl' but it declares 'native'" in refused["trl"]
    assert "importing passband_uninstalled_formats:FORMAT failed" in refused["gone"]
    assert "not an engine.formats.format.ExportFormat" in refused["odd"]
