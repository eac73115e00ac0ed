"""python manage.py export: every task of an environment by default, filters, JSONL and Parquet."""

import json

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from tests.releases.export_data import calibrated_environment

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(arithmetic, alice):
    return calibrated_environment(arithmetic, alice)


def test_without_filters_every_task_of_the_environment(model, tmp_path):
    out = tmp_path / "all.jsonl"
    call_command("export", "--environment", "arithmetic", "--format", "native", "-o", str(out), "--model", "probe")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["key"] for row in rows) == ["capital", "product", "sum", "tool-add"]
    assert {row["key"]: row["calibration"]["band"] if row["calibration"] else None for row in rows}[
        "capital"
    ] == "retire"


def test_band_and_status_filters_and_parquet(model, tmp_path):
    out = tmp_path / "in_band.parquet"
    call_command(
        "export",
        "--environment",
        "arithmetic",
        "--band",
        "in_band",
        "--status",
        "approved",
        "--format",
        "trl",
        "-o",
        str(out),
        "--model",
        "probe",
    )
    table = pq.read_table(out)
    assert sorted(table.column("task_key").to_pylist()) == ["product", "sum"]
    assert {row["band"] for row in table.column("calibration").to_pylist()} == {"in_band"}


def test_mistakes_name_the_option(model, tmp_path):
    out = str(tmp_path / "x.jsonl")
    with pytest.raises(CommandError, match="--environment: no environment named 'nowhere'"):
        call_command("export", "--environment", "nowhere", "--format", "trl", "-o", out)
    with pytest.raises(CommandError, match="--model: no probe model named 'ghost'"):
        call_command("export", "--environment", "arithmetic", "--model", "ghost", "--format", "trl", "-o", out)
    with pytest.raises(CommandError, match="--status: 'sleeping' is not one of draft"):
        call_command("export", "--environment", "arithmetic", "--status", "sleeping", "--format", "trl", "-o", out)
