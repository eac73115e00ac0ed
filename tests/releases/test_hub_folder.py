"""A release built by a real Celery worker, written as a Hugging Face Hub dataset folder: 🤗 datasets
loads every config from the folder by its dataset card, and huggingface_hub reads the card's metadata."""

import io

import pytest
from django.core.management import CommandError, call_command

from engine import formats
from releases import services as releases
from tests.releases.export_data import calibrated_environment, release_built_by_worker
from tests.support.readme import run_readme_python

pytestmark = [pytest.mark.workers]


@pytest.fixture
def release(arithmetic, alice, charlie, settings, tmp_path):
    """The two approved in-band tasks of calibrated_environment, released and built by a worker."""
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    return release_built_by_worker(arithmetic, alice, charlie, var_dir=tmp_path / "var")


def hub_folder(release, folder, *options):
    err = io.StringIO()
    call_command("release_hub_folder", release.pk, "-o", str(folder), *options, stderr=err)
    return err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_every_config_of_the_folder_loads_with_datasets(release, tmp_path, monkeypatch):
    import datasets
    from huggingface_hub import DatasetCard

    folder = tmp_path / "hub"
    out = hub_folder(release, folder, "--license", "cc-by-4.0")
    assert f"hf upload ORG/NAME {folder} . --repo-type dataset" in out
    assert datasets.get_dataset_config_names(str(folder)) == list(formats.names())
    keys = {"sum", "product"}
    for config in formats.names():
        loaded = datasets.load_dataset(str(folder), config, cache_dir=str(tmp_path / "cache"))
        assert list(loaded) == ["train"] and loaded["train"].num_rows == 2, config
        column = "key" if config == "native" else "task_key"
        assert set(loaded["train"][column]) == keys, config
        assert {row["band"] for row in loaded["train"]["calibration"]} == {"in_band"}
    trl = datasets.load_dataset(str(folder), "trl", split="train", cache_dir=str(tmp_path / "cache"))
    assert trl[0]["prompt"][0]["role"] == "user"

    card = DatasetCard.load(folder / "README.md")
    assert card.data.license == "cc-by-4.0"
    assert {"rl-environment", "trl", "verifiers", "nemo-gym"} <= set(card.data.tags)
    assert [config["config_name"] for config in card.data.configs] == list(formats.names())
    assert "| in_band | 2 |" in card.text and "| arithmetic | 0.02 | 0.7 |" in card.text
    assert "probe" in card.text  # the probe model's name
    assert (folder / "manifest.json").exists()

    # docs/trainers.md's example, run where its folder is, with a cache of its own (never the machine's) that
    # already holds another folder of the same name: a release 1 of another database, in the old layout.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    decoy = _decoy_folder(tmp_path / "elsewhere" / "release-1-hub")
    assert datasets.load_dataset(str(decoy), "trl", split="train")["task_key"] == ["humaneval-0"]
    readme_folder = tmp_path / "readme" / "release-1-hub"
    hub_folder(release, readme_folder)
    monkeypatch.chdir(readme_folder.parent)
    dataset = run_readme_python('load_dataset("release-1-hub"')["dataset"]
    assert set(dataset["task_key"]) == keys

    # The folder is written once: a second run into it is refused, naming the folder.
    with pytest.raises(CommandError, match="not empty"):
        hub_folder(release, folder)


def _decoy_folder(folder):
    """A Hub folder of another release with the same name, its trl file at the plain trl/train.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "trl").mkdir(parents=True)
    pq.write_table(pa.table({"task_key": ["humaneval-0"]}), folder / "trl" / "train.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: trl\n  data_files:\n  - split: train\n    path: trl/train.parquet\n---\n"
    )
    return folder


@pytest.mark.django_db(transaction=True)
def test_a_release_that_is_not_ready_is_refused(arithmetic, alice, charlie, tmp_path):
    model = calibrated_environment(arithmetic, alice)
    pending = releases.release_create(user=charlie, probe_model=model, environment=arithmetic)
    with pytest.raises(CommandError, match="not ready"):
        hub_folder(pending, tmp_path / "hub")
    assert not (tmp_path / "hub").exists()
