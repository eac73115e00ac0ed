"""The weak-test check in the app: the import audit runs it on code tasks and flags weak tests, the result is
stored on the version and carried by its quality card, and `manage.py weak_tests` runs it on demand."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from curation import import_jobs
from curation.models import ImportJob, TaskVersion
from curation.services import environment_create
from engine import quality_card
from releases.quality_cards import quality_card_of
from tests.factories import GRADE_BOUNDARIES, GRADE_EXAMPLE_ONLY, grade_task, import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def grading(db):
    return environment_create(name="grading", domain="code")


def version_of(environment, key: str) -> TaskVersion:
    return environment.tasks.get(key=key).current_version


def test_the_import_audit_flags_a_task_whose_only_test_is_the_prompts_example(grading, alice):
    report = import_tasks(
        grading,
        alice,
        grade_task("example-only", test=GRADE_EXAMPLE_ONLY),
        grade_task("boundaries", test=GRADE_BOUNDARIES),
        run_audits=True,
    )
    assert report.ok and report.audit_failures == []
    assert [line.split(":")[0] for line in report.gameable] == ["line 1 (example-only)"]  # its battery agrees
    assert len(report.weak_tests) == 1 and "example-only" in report.weak_tests[0]
    assert "mutants of the reference survived" in report.weak_tests[0]
    weak, strong = version_of(grading, "example-only").weak_tests, version_of(grading, "boundaries").weak_tests
    assert weak["flagged"] and weak["survived_share"] > 0.5 and weak["mutants"] >= 10
    assert "line 9: >= -> >" in weak["survivors"]
    assert not strong["flagged"] and strong["survived"] == 0 and strong["mutants"] >= 10

    card = quality_card.validate(quality_card_of(version=grading.tasks.get(key="example-only").current_version))
    assert card["card_version"] == "1.1.0"
    assert card["weak_tests"] == {
        "status": "run", "surviving_mutant_share": weak["survived_share"], "mutants": weak["mutants"],
        "survived": weak["survived"], "flagged": True, "limit": 0.5,
    }  # fmt: skip
    strong_card = quality_card_of(version=grading.tasks.get(key="boundaries").current_version)
    assert strong_card["weak_tests"]["surviving_mutant_share"] == 0.0 and not strong_card["weak_tests"]["flagged"]
    summary = quality_card.cards_summary([card, strong_card])
    assert summary["weak_tests"] == {"run": 2} and summary["weak_tests_flagged"] == 1


def test_tasks_of_other_kinds_and_tasks_that_fail_their_audit_are_not_mutated(grading, arithmetic, alice):
    broken = {**grade_task("broken", test=GRADE_EXAMPLE_ONLY), "answer": "    return 'B'\n"}
    report = import_tasks(grading, alice, broken, run_audits=True)
    assert len(report.audit_failures) == 1 and report.weak_tests == []
    assert version_of(grading, "broken").weak_tests is None
    import_tasks(arithmetic, alice, math_task("sum"), run_audits=True)
    assert version_of(arithmetic, "sum").weak_tests is None
    assert quality_card_of(version=version_of(arithmetic, "sum"))["weak_tests"] == {"status": "not_run"}


def test_a_background_import_reports_the_flag(grading, alice, media, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        job = import_jobs.import_job_create(
            environment=grading,
            owner=alice,
            upload=SimpleUploadedFile("weak.jsonl", jsonl(grade_task("example-only", test=GRADE_EXAMPLE_ONLY))),
        )
    job = import_jobs.import_job_run(job_id=job.pk)
    assert job.status == ImportJob.Status.DONE
    assert len(job.report["weak_tests"]) == 1 and "example-only" in job.report["weak_tests"][0]


def test_the_import_audit_skips_the_check_when_it_is_turned_off(grading, alice, settings):
    settings.PASSBAND_WEAK_TESTS_MUTANTS = 0
    report = import_tasks(grading, alice, grade_task("example-only", test=GRADE_EXAMPLE_ONLY), run_audits=True)
    assert report.weak_tests == [] and version_of(grading, "example-only").weak_tests is None


def test_the_command_checks_an_environment_on_demand_and_exits_1_on_a_flag(grading, alice, settings):
    settings.PASSBAND_WEAK_TESTS_MUTANTS = 0  # imported without the check: the command runs it
    import_tasks(
        grading,
        alice,
        grade_task("example-only", test=GRADE_EXAMPLE_ONLY),
        grade_task("boundaries", test=GRADE_BOUNDARIES),
        run_audits=True,
    )
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_code:
        call_command("weak_tests", environment="grading", mutants=8, stdout=out)
    assert exit_code.value.code == 1
    text = out.getvalue()
    assert "2 code task(s) checked, 1 flagged" in text and "example-only (version 1)" in text and "survived:" in text
    assert version_of(grading, "example-only").weak_tests["flagged"]
    assert version_of(grading, "boundaries").weak_tests["mutants"] == 8

    out = io.StringIO()
    call_command("weak_tests", environment="grading", task=["boundaries"], json=True, stdout=out)
    assert json.loads(out.getvalue())["checked"] == 1 and json.loads(out.getvalue())["flagged"] == []


def test_the_task_page_shows_the_share_and_the_survivors(grading, alice, client):
    import_tasks(grading, alice, grade_task("example-only", test=GRADE_EXAMPLE_ONLY), run_audits=True)
    client.force_login(alice)
    page = client.get(reverse("task_detail", args=["grading", "example-only"])).content.decode()
    assert 'id="weak-tests-share"' in page and "weak tests</span>" in page and "line 9: &gt;= -&gt; &gt;" in page


def test_a_card_pinned_before_1_1_0_still_validates_and_a_bad_share_is_named(grading, alice):
    import_tasks(grading, alice, grade_task("example-only", test=GRADE_EXAMPLE_ONLY), run_audits=True)
    card = quality_card_of(version=version_of(grading, "example-only"))
    assert quality_card.validate({**card, "card_version": "1.0.0", "weak_tests": {"status": "not_run"}})
    with pytest.raises(quality_card.QualityCardError) as error:
        quality_card.validate({**card, "weak_tests": {**card["weak_tests"], "surviving_mutant_share": 1.5}})
    assert "weak_tests/surviving_mutant_share" in str(error.value)
