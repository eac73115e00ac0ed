"""Hostile input to uploads and exports: keys that normalise into other URLs, lone surrogates,
environment names that break pages, and exports that fail part way."""

import pytest
from django.core.management import CommandError, call_command

from curation.errors import CurationError
from curation.imports import ImportRejected, tasks_import
from curation.models import Environment, Task
from curation.services import environment_create
from engine import formats
from tests.factories import jsonl, math_task

pytestmark = pytest.mark.django_db


def problems_of(environment, owner, data: bytes):
    with pytest.raises(ImportRejected) as caught:
        tasks_import(environment=environment, owner=owner, data=data, filename="tasks.jsonl", run_audits=False)
    return [(p.line, p.field, p.reason) for p in caught.value.report.problems]


@pytest.mark.parametrize("key", ["z/../evil", "../evil", "a/./b", "a//b", "a/", "/a", ".hidden", "a/..", "x" * 201])
def test_keys_that_a_browser_would_normalise_are_refused(arithmetic, alice, key):
    problems = problems_of(arithmetic, alice, jsonl(math_task(key)))
    assert [(line, field) for line, field, _ in problems] == [(1, "key")]
    assert not Task.objects.exists()


@pytest.mark.parametrize("key", ["gsm8k/test/0001", "a.b:c-d_e", "A1", "v2/x.y"])
def test_keys_with_segments_are_fine(arithmetic, alice, key):
    report = tasks_import(
        environment=arithmetic, owner=alice, data=jsonl(math_task(key)), filename="t.jsonl", run_audits=False
    )
    assert report.created == [key]


def test_lone_surrogates_are_refused_per_line_and_field(arithmetic, alice):
    lines = [
        math_task("fine"),
        '{"key": "p", "prompt": "x\\ud800y", "answer": "1", "verifier": {"kind": "exact"}}',
        '{"key": "m", "prompt": "What?", "answer": "1", "verifier": {"kind": "exact"}, "metadata": {"a": ["ok", "\\udfff"]}}',
        '{"key": "k\\ud800", "prompt": "What?", "answer": "1"}',
    ]
    problems = problems_of(arithmetic, alice, jsonl(*lines))
    assert {(line, field) for line, field, _ in problems} >= {(2, "prompt"), (3, "metadata"), (4, "key")}
    assert any("surrogate" in reason and "a[1]" in reason for line, _, reason in problems if line == 3)
    assert not Task.objects.exists()


def test_the_editor_refuses_a_lone_surrogate(client, alice, arithmetic):
    tasks_import(environment=arithmetic, owner=alice, data=jsonl(math_task("t")), filename="t.jsonl", run_audits=False)
    client.force_login(alice)
    response = client.post(
        "/tasks/arithmetic/t/edit/",
        {
            "prompt": "What is 1 + 1?",
            "answer": "2",
            "verifier": '{"kind": "math"}',
            "metadata": '{"note": "\\ud800"}',
            "tools": "[]",
            "domain": "math",
            "authoring_cost_usd": "0",
        },
    )
    assert response.status_code in (200, 400)
    assert Task.objects.get(key="t").versions.count() == 1


@pytest.mark.parametrize("name", ["bad env/../x", "../x", "a b", "Ünïcode", "", "x" * 81])
def test_environment_names_must_be_slugs_everywhere(name, alice, tmp_path):
    with pytest.raises(CurationError, match="name"):
        environment_create(name=name, domain="math")
    upload = tmp_path / "tasks.jsonl"
    upload.write_bytes(jsonl(math_task("a")))
    with pytest.raises(CommandError, match="--environment"):
        call_command("import_tasks", str(upload), "--environment", name, "--create", "--owner", "alice", "--no-audit")
    assert not Environment.objects.exists()


def test_an_export_that_fails_part_way_leaves_no_file(tmp_path):
    def records():
        yield {
            "task_key": "a",
            "environment": "e",
            "status": "approved",
            "version": 1,
            "version_hash": "h",
            "prompt": [{"role": "user", "content": "x"}],
            "answer": "1",
            "verifier": {"kind": "exact"},
            "tools": [],
            "metadata": {},
            "domain": "math",
            "authoring_cost_usd": "0",
        }
        raise OSError("No space left on device")

    target = tmp_path / "out.jsonl"
    with pytest.raises(OSError):
        formats.write_file(records=records(), format="native", file_type="jsonl", path=target)
    assert list(tmp_path.iterdir()) == []
