"""manage.py import_verifiers: a verifiers taskset Passband did not write (tests/plugins/vf-word-arithmetic,
an installed package) imported through the task import, all or nothing, with its audits."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from curation.models import ImportMapping, Task

pytestmark = pytest.mark.django_db

TASKSET = "vf-word-arithmetic"
MAPPING = {"prompt": "{prompt}", "answer_column": "solution", "answer_extractor": "after_hashes", "key_column": "key"}
BOXED = "\\boxed{{answer}}"


@pytest.fixture
def mapping_file(tmp_path):
    path = tmp_path / "mapping.json"
    path.write_text(json.dumps(MAPPING))
    return path


def run(*args, **options):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("import_verifiers", *args, stdout=out, stderr=err, **options)
    except CommandError as error:
        raise CommandError(f"{error}\n{err.getvalue()}") from None
    return out.getvalue()


def test_the_rows_import_once_as_tasks_scored_by_the_taskset(alice, mapping_file):
    said = run(
        TASKSET,
        environment="wa",
        create=True,
        owner="alice",
        mapping_file=mapping_file,
        mapping="gsm8k-style",
        reference_format=BOXED,
        taskset_args='{"topics": ["shopping", "travel"]}',
    )
    assert "6 new task(s)" in said and "0 audit failure(s), 0 gameable" in said
    version = Task.objects.get(key="shopping-1").current_version
    assert version.prompt[-1]["content"].endswith("How many dollars does she spend?")
    assert version.answer == "14" and version.audit_passed and not version.gameable
    assert version.verifier["kind"] == "verifiers_reward" and version.verifier["data"]["id"] == "shopping-1"
    assert version.verifier["args"] == {"topics": ["shopping", "travel"]}
    assert version.metadata["verifiers"] == {
        "taskset": TASKSET,
        "args": {"topics": ["shopping", "travel"]},
        "idx": 0,
        "key": "shopping-1",
        "package": "vf-word-arithmetic 0.2.0",
    }
    assert ImportMapping.objects.filter(name="gsm8k-style").exists()
    again = run(
        TASKSET,
        environment="wa",
        owner="alice",
        mapping="gsm8k-style",  # the saved mapping
        reference_format=BOXED,
        taskset_args='{"topics": ["shopping", "travel"]}',
    )
    assert "0 new task(s)" in again and "6 duplicate(s)" in again


def test_without_a_mapping_the_default_names_the_field_the_rows_lack(alice):
    with pytest.raises(CommandError) as raised:
        run(TASKSET, environment="wa", create=True, owner="alice")
    assert "nothing imported; 1 problem(s)" in str(raised.value)
    assert "field 'mapping: answer_column': the file has no column 'answer'" in str(raised.value)
    assert not Task.objects.exists()


def test_a_reference_the_rewards_refuse_is_an_audit_failure(alice, mapping_file):
    said = run(TASKSET, environment="wa", create=True, owner="alice", mapping_file=mapping_file, limit=2)
    assert "2 new task(s)" in said and "2 audit failure(s)" in said
    assert "the reference answer does not pass its verifier" in said
    assert set(Task.objects.values_list("current_version__audit_passed", flat=True)) == {False}


def test_a_lenient_reward_is_flagged_gameable_at_import(alice, mapping_file):
    said = run(
        TASKSET,
        environment="wa",
        create=True,
        owner="alice",
        mapping_file=mapping_file,
        reference_format=BOXED,
        taskset_args='{"topics": ["baking"], "task": {"answer_anywhere": true}}',
    )
    assert said.count("gameable:") == 2 and "paid a hedge in the reference's format" in said
    assert set(Task.objects.values_list("current_version__gameable", flat=True)) == {True}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"taskset_args": "{not json"}, "--args: not JSON"),
        ({"taskset_args": "[1]"}, "--args: must be a JSON object"),
        ({"taskset_args": '{"topics": 5}'}, "refused its args"),
        ({"taskset_args": '{"topics": ["cooking"]}'}, "loaded no tasks"),
        ({"limit": 0}, "limit must be at least 1"),
    ],
)
def test_bad_options_say_what_is_wrong_and_write_nothing(alice, mapping_file, options, message):
    with pytest.raises(CommandError, match=message):
        run(TASKSET, environment="wa", create=True, owner="alice", mapping_file=mapping_file, **options)
    assert not Task.objects.exists()


def test_an_unknown_taskset_is_refused(alice):
    with pytest.raises(CommandError, match="taskset 'no-such-taskset' is not installed"):
        run("no-such-taskset", environment="wa", create=True, owner="alice")
