"""`manage.py import_tasks FILE --environment NAME --mapping NAME`: a saved mapping from the command line."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from curation.import_mappings import import_mapping_save
from curation.models import ImportMapping, Task
from engine.task_mapping import ColumnMapping
from tests.factories import gsm8k_rows, write_parquet

pytestmark = pytest.mark.django_db

GSM8K = {
    "prompt": "{question}",
    "answer_column": "answer",
    "answer_extractor": "after_hashes",
    "key_column": "#row",
    "key_prefix": "gsm8k/",
}


def run(*args, **options) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_tasks", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_a_saved_mapping_imports_a_parquet_file_and_again_changes_nothing(arithmetic, alice, tmp_path):
    import_mapping_save(environment=arithmetic, name="gsm8k", mapping=ColumnMapping.from_dict(GSM8K), by=alice)
    write_parquet(tmp_path / "test.parquet", gsm8k_rows(30))
    out, _ = run(str(tmp_path / "test.parquet"), environment="arithmetic", mapping="gsm8k", owner="alice")
    assert "30 new task(s)" in out and Task.objects.filter(owner=alice).count() == 30
    assert Task.objects.get(key="gsm8k/2").current_version.answer == "7"
    out, _ = run(str(tmp_path / "test.parquet"), environment="arithmetic", mapping="gsm8k", owner="alice")
    assert "0 new task(s), 0 new version(s), 30 duplicate(s)" in out


def test_a_datasets_folder_with_a_mapping_file_saved_under_a_name(arithmetic, alice, tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(gsm8k_rows(12)).save_to_disk(str(tmp_path / "gsm8k-test"))
    (tmp_path / "mapping.json").write_text(json.dumps(GSM8K))
    out, _ = run(
        str(tmp_path / "gsm8k-test"),
        environment="arithmetic",
        mapping_file=str(tmp_path / "mapping.json"),
        mapping="gsm8k",
        owner="alice",
    )
    assert "12 new task(s)" in out and ImportMapping.objects.get(name="gsm8k").config["prompt"] == "{question}"


def test_mapping_errors_name_what_is_wrong_and_import_nothing(arithmetic, alice, tmp_path):
    write_parquet(tmp_path / "test.parquet", gsm8k_rows(5))
    path = str(tmp_path / "test.parquet")
    with pytest.raises(CommandError, match="No mapping 'gsm8k' in arithmetic; its mappings: none yet"):
        run(path, environment="arithmetic", mapping="gsm8k", owner="alice")
    (tmp_path / "bad.json").write_text(json.dumps(GSM8K | {"answer_extractor": "after_hash"}))
    with pytest.raises(CommandError, match=r"bad.json, field 'answer_extractor': must be one of"):
        run(path, environment="arithmetic", mapping_file=str(tmp_path / "bad.json"), owner="alice")
    rows = gsm8k_rows(5)
    rows[3]["answer"] = "42"
    write_parquet(tmp_path / "test.parquet", rows)
    (tmp_path / "good.json").write_text(json.dumps(GSM8K))
    err = io.StringIO()
    with pytest.raises(CommandError, match="nothing imported; 1 problem"):
        call_command(
            "import_tasks",
            path,
            environment="arithmetic",
            mapping_file=str(tmp_path / "good.json"),
            owner="alice",
            stderr=err,
        )
    assert "test.parquet, row 4, field 'answer': has no '####'" in err.getvalue()
    assert not Task.objects.exists()
