"""The Parquet writer: row groups written by a writer thread, in order, and its failures surface."""

import pyarrow.parquet as pq
import pytest

from engine import formats


def records(count: int) -> list[dict]:
    return [
        {
            "task_key": f"t-{i:03d}",
            "environment": "math",
            "domain": "math",
            "status": "approved",
            "version": 1,
            "version_hash": f"{i:064x}",
            "prompt": [{"role": "user", "content": f"What is {i} + 1?"}],
            "answer": str(i + 1),
            "verifier": {"kind": "math"},
            "tools": [],
            "metadata": {"level": i % 3},
            "authoring_cost_usd": "250",
            "attempts": 8,
            "successes": i % 9,
            "pass_rate": (i % 9) / 8,
            "interval_low": 0.1,
            "interval_high": 0.6,
            "band": "in_band",
            "grpo_signal": 0.5,
            "probe_model": "small",
        }
        for i in range(count)
    ]


def test_many_row_groups_keep_every_row_in_order(tmp_path):
    path = tmp_path / "native.parquet"
    rows = formats.rows_of(records=records(23), format="native")
    assert formats.write_parquet(rows=rows, path=path, format="native", batch_size=5) == 23
    table = pq.read_table(path)
    assert pq.ParquetFile(path).num_row_groups == 5
    assert table.column("key").to_pylist() == [f"t-{i:03d}" for i in range(23)]
    assert table.column("metadata").to_pylist()[4] == '{"level":1}'
    assert table.column("calibration").to_pylist()[9]["successes"] == 0


def test_an_empty_export_is_a_valid_file_with_the_schema(tmp_path):
    path = tmp_path / "empty.parquet"
    assert formats.write_parquet(rows=iter(()), path=path, format="trl") == 0
    assert pq.read_table(path).schema.names == formats.arrow_schema("trl").names


def test_a_file_that_cannot_be_written_raises_instead_of_hanging(tmp_path):
    rows = formats.rows_of(records=records(50), format="native")
    with pytest.raises(OSError):
        formats.write_parquet(rows=rows, path=tmp_path / "missing-folder" / "x.parquet", format="native", batch_size=5)


def test_a_failing_row_source_stops_the_writer_and_raises(tmp_path):
    def broken():
        yield from formats.rows_of(records=records(7), format="native")
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError, match="went away"):
        formats.write_parquet(rows=broken(), path=tmp_path / "partial.parquet", format="native", batch_size=3)
