"""Every trainer format, as JSONL and Parquet, loads with `datasets.load_dataset` and round-trips its fields."""

import json

import pytest

from engine import formats
from releases.records import export_records, export_versions
from tests.releases.export_data import TOOL, calibrated_environment, predicted_calibration

pytestmark = pytest.mark.django_db


@pytest.fixture
def records(arithmetic, alice):
    model = calibrated_environment(arithmetic, alice)
    versions = export_versions(environment=arithmetic, probe_model=model)
    return list(export_records(versions=versions, probe_model=model))


def expected_rows(records, format, file_type):
    rows = list(formats.rows_of(records=[dict(r) for r in records], format=format))
    if file_type == "parquet":
        for row in rows:
            for column in formats.format_named(format).json_columns:
                row[column] = formats.json_text(row[column])
    return rows


def decoded(row: dict, format: str, file_type: str) -> dict:
    """Undo the documented JSON-text columns so rows compare as the trainer will use them."""
    row = dict(row)
    if file_type == "parquet":
        for column in formats.format_named(format).json_columns:
            row[column] = json.loads(row[column])
    return row


@pytest.mark.parametrize("file_type", formats.FILE_TYPES)
@pytest.mark.parametrize("format", formats.names())
def test_every_format_loads_with_datasets_and_round_trips(records, format, file_type, tmp_path):
    datasets = pytest.importorskip("datasets")
    path = tmp_path / f"{format}.{file_type}"
    assert formats.write_file(records=records, format=format, file_type=file_type, path=path) == 4
    loaded = datasets.load_dataset(
        "json" if file_type == "jsonl" else "parquet",
        data_files=str(path),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    expected = expected_rows(records, format, file_type)
    assert loaded.num_rows == len(expected)
    for got, want in zip(loaded, expected, strict=True):
        if format in ("native", "nemo_gym") and file_type == "jsonl":
            # A JSON reader unifies objects of one column into one struct: keys a row lacks read back as None.
            got = {k: v for k, v in got.items() if k not in formats.format_named(format).json_columns}
            want = {k: v for k, v in want.items() if k not in formats.format_named(format).json_columns}
        assert got == want


def test_every_row_carries_key_hash_and_calibration(records):
    by_key = {record["task_key"]: record for record in records}
    for format in formats.names():
        for record, row in zip(
            records, formats.rows_of(records=[dict(r) for r in records], format=format), strict=True
        ):
            text = json.dumps(row)
            assert record["task_key"] in text and record["version_hash"] in text
    row = formats.format_named("trl").row(by_key["sum"])
    assert row["calibration"] == {
        "probe_model": "probe",
        "attempts": 8,
        "successes": 3,
        "pass_rate": 3 / 8,
        "interval": [0.1, 0.9],
        "band": "in_band",
        "band_predicted": False,
        "grpo_signal": 0.5,
    }
    assert formats.format_named("trl").row(by_key["tool-add"])["calibration"] is None


@pytest.mark.parametrize("file_type", formats.FILE_TYPES)
@pytest.mark.parametrize("format", formats.names())
def test_a_predicted_band_is_marked_in_every_format(arithmetic, alice, format, file_type, tmp_path):
    """A band the item-response model predicted for a checkpoint (no rollouts) says so in every row."""
    datasets = pytest.importorskip("datasets")
    model = calibrated_environment(arithmetic, alice)
    predicted_calibration(arithmetic, model, "tool-add")
    versions = export_versions(environment=arithmetic, probe_model=model)
    records = list(export_records(versions=versions, probe_model=model))
    path = tmp_path / f"{format}.{file_type}"
    assert formats.write_file(records=records, format=format, file_type=file_type, path=path) == 4
    loaded = datasets.load_dataset(
        "json" if file_type == "jsonl" else "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path)
    )
    assert sorted(row["calibration"]["band_predicted"] for row in loaded) == [False, False, False, True]
    predicted = [row for row in loaded if row["calibration"]["band_predicted"]]
    assert predicted[0]["calibration"]["attempts"] == 0 and predicted[0]["calibration"]["band"] == "in_band"
    assert "tool-add" in json.dumps(predicted[0], default=str)


def test_formats_put_fields_where_each_trainer_expects_them(records):
    by_key = {record["task_key"]: record for record in records}
    trl = formats.format_named("trl").row(by_key["capital"])
    assert trl["prompt"][0] == {"role": "system", "content": "Answer in one word."}
    assert json.loads(trl["verifier"]) == {"kind": "exact", "ignore_case": True}
    verifiers_row = formats.format_named("verifiers").row(by_key["product"])
    assert verifiers_row["task"] == "arithmetic" and verifiers_row["answer"] == "1547"
    assert json.loads(verifiers_row["info"])["metadata"] == {"source": "textbook", "page": 3}
    nemo = formats.format_named("nemo_gym").row(by_key["tool-add"])
    # The Responses API's function tool shape, which NeMo Gym validates against.
    assert nemo["responses_create_params"]["tools"] == [
        {"type": "function", "name": "add", "parameters": TOOL["function"]["parameters"], "strict": False}
    ]
    assert formats.chat_tool(nemo["responses_create_params"]["tools"][0]) == TOOL
    assert nemo["verifier"] == {"kind": "numeric", "abs_tol": 0.5} and nemo["expected_answer"] == "4"
    assert "tools" not in formats.format_named("nemo_gym").row(by_key["sum"])["responses_create_params"]
    native = formats.format_named("native").row(by_key["sum"])
    assert native["key"] == "sum" and native["authoring_cost_usd"] == "250.00" and native["difficulty"] is None
    assert formats.format_named("native").row(by_key["product"])["difficulty"] == 2.0


def test_native_jsonl_imports_back(records, tmp_path, alice):
    from curation.imports import tasks_import
    from curation.services import environment_create

    path = tmp_path / "native.jsonl"
    formats.write_file(records=records, format="native", file_type="jsonl", path=path)
    copy = environment_create(name="copy", domain="math")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    data = "".join(
        json.dumps({k: v for k, v in row.items() if k not in formats.NATIVE_EXTRA_FIELDS}) + "\n" for row in lines
    ).encode()
    report = tasks_import(environment=copy, owner=alice, data=data, filename="native.jsonl")
    assert report.ok, report.summary()
    assert sorted(copy.tasks.values_list("current_version__content_hash", flat=True)) == sorted(
        r["version_hash"] for r in records
    )
    # the declared difficulty comes back with the task
    assert copy.tasks.get(key="product").current_version.declared_difficulty == 2.0


def test_filters_and_unknown_values(arithmetic, alice):
    model = calibrated_environment(arithmetic, alice)
    in_band = export_versions(environment=arithmetic, probe_model=model, band="in_band")
    assert sorted(r["task_key"] for r in in_band) == ["product", "sum"]
    assert export_versions(environment=arithmetic, probe_model=model, status="draft").count() == 0
    from releases.task_filters import TaskFilterError

    with pytest.raises(TaskFilterError, match="band: 'hot' is not one of undecided, too_hard"):
        export_versions(band="hot")
    with pytest.raises(formats.ExportFormatError, match="Unknown format 'csv'"):
        formats.check_format("csv")
