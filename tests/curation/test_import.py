"""Task import: every bad line named by line and field, nothing half-written, duplicates reported."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from curation.imports import ImportRejected, tasks_import
from curation.models import Task, TaskVersion
from tests.factories import import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db


def rejected_problems(environment, owner, data: bytes, filename="tasks.jsonl"):
    with pytest.raises(ImportRejected) as caught:
        tasks_import(environment=environment, owner=owner, data=data, filename=filename, run_audits=False)
    return [(p.line, p.field, p.reason) for p in caught.value.report.problems]


def test_valid_file_imports_every_task_with_a_version_and_hash(arithmetic, alice):
    report = import_tasks(
        arithmetic,
        alice,
        math_task("a-1"),
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}], "answer": "2"},
    )
    assert report.ok and len(report.created) == 2
    first = Task.objects.get(key="a-1")
    assert first.owner == alice and first.current_version.number == 1
    assert first.current_version.prompt == [{"role": "user", "content": "What is 2 + 3?"}]
    assert len(first.current_version.content_hash) == 64
    generated = Task.objects.exclude(key="a-1").get()
    assert generated.key.startswith("arithmetic-")  # generated when absent
    assert generated.current_version.verifier == {"kind": "math"}  # the environment's default


def test_bad_json_names_the_line_and_imports_nothing(arithmetic, alice):
    problems = rejected_problems(arithmetic, alice, jsonl(math_task("ok-1"), '{"prompt": "x",', math_task("ok-2")))
    assert problems[0][0] == 2 and "not valid JSON" in problems[0][2]
    assert Task.objects.count() == 0


def test_missing_field_and_wrong_type_are_named(arithmetic, alice):
    problems = rejected_problems(
        arithmetic,
        alice,
        jsonl(
            {"key": "no-prompt", "answer": "1"},
            math_task("bad-cost", authoring_cost_usd="lots"),
            math_task("bad-meta", metadata=[1]),
        ),
    )
    assert (1, "prompt", "missing required field") in problems
    assert any(line == 2 and field == "authoring_cost_usd" for line, field, _ in problems)
    assert any(line == 3 and field == "metadata" and "object" in reason for line, field, reason in problems)
    assert TaskVersion.objects.count() == 0


def test_declared_difficulty_is_a_word_or_a_number_and_anything_else_is_named(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        math_task("word", difficulty="Hard"),
        math_task("level", question="What is 4 + 4?", answer="8", difficulty=4),
        math_task("none", question="What is 5 + 5?", answer="10"),
    )
    declared = dict(TaskVersion.objects.values_list("task__key", "declared_difficulty"))
    assert declared == {"word": 3.0, "level": 4.0, "none": None}
    problems = rejected_problems(
        arithmetic,
        alice,
        jsonl(
            math_task("bad-word", question="What is 6 + 6?", answer="12", difficulty="impossible"),
            math_task("bad-bool", question="What is 7 + 7?", answer="14", difficulty=True),
        ),
    )
    assert [(line, field) for line, field, _ in problems] == [(1, "difficulty"), (2, "difficulty")]
    assert "easy, medium, hard" in problems[0][2]
    assert TaskVersion.objects.count() == 3


def test_prompt_of_wrong_type_and_unknown_verifier(arithmetic, alice):
    problems = rejected_problems(
        arithmetic, alice, jsonl({"prompt": 5, "answer": "1"}, math_task("v", verifier={"kind": "telepathy"}))
    )
    assert problems[0][:2] == (1, "prompt")
    assert problems[1][:2] == (2, "verifier") and "telepathy" in problems[1][2]


def test_unknown_field_is_an_error(arithmetic, alice):
    assert rejected_problems(arithmetic, alice, jsonl(math_task("x", anwser="5")))[0][:2] == (1, "anwser")


def test_duplicate_content_is_reported_not_imported_twice(arithmetic, alice):
    import_tasks(arithmetic, alice, math_task("first"))
    report = import_tasks(
        arithmetic, alice, math_task("again"), math_task("new", question="What is 3 + 4?", answer="7")
    )
    assert report.created == ["new"]
    assert len(report.duplicates) == 1 and "line 1" in report.duplicates[0]
    assert Task.objects.count() == 2


def test_duplicate_within_one_file_and_repeated_keys(arithmetic, alice):
    report = import_tasks(arithmetic, alice, math_task("one"), math_task("two"))
    assert report.created == ["one"] and "same content as line 1" in report.duplicates[0]
    problems = rejected_problems(arithmetic, alice, jsonl(math_task("k", question="a?"), math_task("k", question="b?")))
    assert problems == [(2, "key", "key 'k' already used on line 1")]


def test_same_key_with_new_content_becomes_a_new_version(arithmetic, alice):
    import_tasks(arithmetic, alice, math_task("t"))
    report = import_tasks(arithmetic, alice, math_task("t", question="What is 2 + 4?", answer="6"))
    assert report.new_versions == ["t"]
    task = Task.objects.get(key="t")
    assert task.current_version.number == 2 and task.versions.count() == 2


def test_another_authors_key_is_refused(arithmetic, alice, bob):
    import_tasks(arithmetic, alice, math_task("mine"))
    problems = rejected_problems(arithmetic, bob, jsonl(math_task("mine", question="What is 9 + 9?", answer="18")))
    assert problems[0][1] == "key" and "another author" in problems[0][2]


def test_non_utf8_line_is_named(arithmetic, alice):
    data = jsonl(math_task("a")) + b'{"prompt": "caf\xe9", "answer": "1"}\n'
    problems = rejected_problems(arithmetic, alice, data)
    assert problems[0][0] == 2 and "UTF-8" in problems[0][2]


@override_settings(PASSBAND_MAX_LINE_BYTES=200, PASSBAND_MAX_UPLOAD_BYTES=10_000)
def test_oversized_line_and_file_get_clear_messages(arithmetic, alice):
    long_line = math_task("long", question="x" * 300)
    problems = rejected_problems(arithmetic, alice, jsonl(math_task("short"), long_line))
    assert problems[0][0] == 2 and "limit is 200" in problems[0][2]
    big = jsonl(*[math_task(f"k{i}", question=f"What is {i} + 1?") for i in range(200)])
    problems = rejected_problems(arithmetic, alice, big)
    assert problems[0][0] == 0 and "the limit is 10,000" in problems[0][2]


def test_empty_file_is_an_error(arithmetic, alice):
    assert "no tasks" in rejected_problems(arithmetic, alice, b"\n\n")[0][2]


def test_csv_import(arithmetic, alice):
    data = (
        b'key,prompt,answer,verifier,difficulty\nc-1,"What is 1 + 1?",2,"{""kind"": ""math""}",2.5\n'
        b'c-2,"What is 1 + 2?",3,"{""kind"": ""math""}",\n'
    )
    report = tasks_import(environment=arithmetic, owner=alice, data=data, filename="tasks.csv", run_audits=False)
    assert report.created == ["c-1", "c-2"]
    assert dict(TaskVersion.objects.values_list("task__key", "declared_difficulty")) == {"c-1": 2.5, "c-2": None}


def test_audits_run_at_import_and_flag_a_wrong_reference(arithmetic, alice):
    lenient = {"key": "wrong", "prompt": "Say anything.", "answer": "x", "verifier": {"kind": "regex", "pattern": ".*"}}
    report = import_tasks(arithmetic, alice, math_task("right"), lenient, run_audits=True)
    versions = {v.task.key: v for v in TaskVersion.objects.select_related("task")}
    assert versions["right"].audit_passed is True
    assert versions["wrong"].audit_passed is False and versions["wrong"].audit_problems
    assert len(report.audit_failures) == 1 and "wrong" in report.audit_failures[0]


def test_versions_are_immutable(arithmetic, alice):
    import_tasks(arithmetic, alice, math_task("t"))
    version = TaskVersion.objects.get()
    version.answer = "6"
    with pytest.raises(ValueError):
        version.save()


def test_command_reports_errors_and_exits_non_zero(tmp_path, arithmetic, alice, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(jsonl(math_task("a"), {"key": "b", "answer": "3"}))
    with pytest.raises(CommandError):
        call_command("import_tasks", str(path), "--environment", "arithmetic", "--owner", "alice", "--no-audit")
    assert "bad.jsonl, line 2, field 'prompt': missing required field" in capsys.readouterr().err
    assert Task.objects.count() == 0


def test_command_creates_environment_and_imports(tmp_path, alice):
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps(math_task("a")) + "\n")
    call_command("import_tasks", str(path), "--environment", "fresh", "--create", "--owner", "alice", "--no-audit")
    assert Task.objects.get().environment.name == "fresh"
    with pytest.raises(CommandError, match="pass --create"):
        call_command("import_tasks", str(path), "--environment", "missing", "--owner", "alice")
