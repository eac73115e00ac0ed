"""Every export format of a real release reads back as the same tasks, scored by their own verifiers."""

import pytest

from engine.integrations.release import ReleaseFileError, read_release, score


def test_every_format_reads_back_the_same_tasks(release_dir):
    native = read_release(release_dir / "native.jsonl")
    assert sorted(task.task_key for task in native) == ["capital", "product", "sum", "tool-add"]
    assert all(task.id == f"{task.task_key}@{task.version_hash}" and len(task.version_hash) == 64 for task in native)
    for format in ("native", "trl", "verifiers", "nemo_gym"):
        for file_type in ("jsonl", "parquet"):
            tasks = read_release(release_dir / f"{format}.{file_type}")
            assert [(t.id, t.prompt, t.answer, t.verifier, t.tools) for t in tasks] == [
                (t.id, t.prompt, t.answer, t.verifier, t.tools) for t in native
            ], (format, file_type)


def test_score_uses_the_tasks_verifier(release_dir):
    tasks = {task.task_key: task for task in read_release(release_dir / "verifiers.parquet")}
    assert score(tasks["capital"], completion="paris").outcome == "pass"  # exact, ignore_case
    assert score(tasks["product"], completion=[{"role": "assistant", "content": "1547"}]).reward == 1.0
    assert score(tasks["product"], completion="1548").reward == 0.0


def test_a_file_that_is_not_a_release_is_refused(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"question": "2 + 3?"}\n')
    with pytest.raises(ReleaseFileError, match="line 1"):
        read_release(path)
