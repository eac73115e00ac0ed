"""Reading datasets' rows: JSONL, CSV, Parquet, Arrow files and `datasets` folders, a batch at a time."""

import pyarrow
import pyarrow.ipc
import pytest

from engine import task_sources
from engine.task_sources import SourceError, TaskSource
from tests.factories import gsm8k_rows, jsonl, write_parquet

LIMIT = 1 << 20


def rows_of(source: TaskSource) -> list:
    return list(source.records(max_line_bytes=LIMIT))


def test_every_format_yields_the_same_rows_with_their_numbers(tmp_path):
    rows = gsm8k_rows(3)
    (tmp_path / "g.jsonl").write_bytes(jsonl(*rows))
    write_parquet(tmp_path / "g.parquet", rows)
    table = pyarrow.Table.from_pylist(rows)
    with pyarrow.ipc.new_file(tmp_path / "file.arrow", table.schema) as writer:  # Feather v2 / IPC file
        writer.write_table(table)
    with pyarrow.ipc.new_stream(tmp_path / "stream.arrow", table.schema) as writer:  # what `datasets` writes
        writer.write_table(table)
    for name in ("g.jsonl", "g.parquet", "file.arrow", "stream.arrow"):
        source = TaskSource(filename=name, path=tmp_path / name)
        assert rows_of(source) == [(number, row, []) for number, row in enumerate(rows, start=1)], name
        assert source.columns(max_line_bytes=LIMIT) == ["question", "answer"]
        assert source.bytes_read == source.size_bytes
    assert TaskSource(filename="g.parquet", path=tmp_path / "g.parquet").unit == "row"
    assert TaskSource(filename="g.jsonl", path=tmp_path / "g.jsonl").unit == "line"


def test_csv_rows_are_strings_numbered_by_line_and_a_ragged_row_is_named():
    data = b'question,answer\n"two\nlines",4\nq,1,extra\n'
    source = TaskSource(filename="t.csv", data=data)
    assert source.columns(max_line_bytes=LIMIT) == ["question", "answer"]
    (first, second) = rows_of(source)
    assert first == (3, {"question": "two\nlines", "answer": "4"}, [])
    assert second[0] == 4 and second[1] is None and "more values than header" in second[2][0].reason


def test_parquet_streams_in_batches_and_reports_progress(tmp_path):
    write_parquet(tmp_path / "big.parquet", gsm8k_rows(3 * task_sources.ROW_BATCH + 7))
    source = TaskSource(filename="big.parquet", path=tmp_path / "big.parquet")
    seen = []
    for number, _, _ in source.records(max_line_bytes=LIMIT):
        if number % task_sources.ROW_BATCH == 1:
            seen.append(source.bytes_read)
    assert seen == sorted(seen) and seen[0] == 0 and 0 < seen[-1] < source.size_bytes
    assert source.bytes_read == source.size_bytes


def test_a_datasets_folder_is_read_through_its_state_file(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = gsm8k_rows(5)
    split = datasets.Dataset.from_list(rows)
    split.save_to_disk(str(tmp_path / "one"), num_shards=2)
    source = TaskSource(filename="one", path=tmp_path / "one")
    assert source.kind == "arrow" and [row for _, row, _ in rows_of(source)] == rows
    assert [number for number, _, _ in rows_of(source)] == [1, 2, 3, 4, 5]  # numbered across shards
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(str(tmp_path / "splits"))
    splits = TaskSource(filename="splits", path=tmp_path / "splits")
    ((line, row, problems),) = rows_of(splits)
    assert line == 0 and row is None and "splits train, test" in problems[0].reason
    with pytest.raises(SourceError, match="splits"):
        splits.columns(max_line_bytes=LIMIT)
    assert [row for _, row, _ in rows_of(TaskSource(filename="test", path=tmp_path / "splits" / "test"))] == rows


def test_a_file_that_is_not_what_its_name_says_is_one_problem_naming_it():
    for name in ("broken.parquet", "broken.arrow"):
        ((line, row, problems),) = rows_of(TaskSource(filename=name, data=b"not a table at all"))
        assert line == 0 and row is None
        assert str(problems[0]).startswith(f"{name}: not a") and problems[0].line == 0


def test_jsonl_columns_come_from_the_first_rows_in_order():
    data = jsonl({"question": "q", "answer": "a"}, "not json", {"question": "q", "id": 7})
    source = TaskSource(filename="t.jsonl", data=data)
    assert source.columns(max_line_bytes=LIMIT) == ["question", "answer", "id"]
    assert [number for number, _ in source.first_rows(5, max_line_bytes=LIMIT)] == [1, 3]


def test_a_parquet_row_group_too_big_to_unpack_is_refused_before_it_is_read(tmp_path, monkeypatch):
    rows = [{"question": f"{index}" + "x" * 100_000, "answer": "1"} for index in range(20)]
    write_parquet(tmp_path / "bomb.parquet", rows)
    assert (tmp_path / "bomb.parquet").stat().st_size < 100_000  # 2 MB of text, compressed
    monkeypatch.setattr(task_sources, "MAX_ROW_GROUP_BYTES", 1_000_000)
    ((line, row, problems),) = rows_of(TaskSource(filename="bomb.parquet", path=tmp_path / "bomb.parquet"))
    assert (
        line == 0
        and row is None
        and "row group 1 is" in problems[0].reason
        and "smaller row groups" in problems[0].reason
    )
