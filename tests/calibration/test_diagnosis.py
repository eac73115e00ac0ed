"""The too_hard diagnosis through the probe path: a campaign against a fake OpenAI-compatible server, real
verifiers (math through math-verify), the calibration service storing the diagnosis with the band."""

from datetime import timedelta

import pytest
from django.core.management import call_command

from calibration import services
from calibration.models import Band, Calibration, Diagnosis, Rollout
from releases import task_filters
from releases.records import export_versions
from tests.factories import TOO_HARD_MAX_NEW_TOKENS, too_hard_answer, too_hard_probe, too_hard_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db


@pytest.fixture
def model():
    with serve_openai(respond=too_hard_answer) as base_url:
        yield services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=TOO_HARD_MAX_NEW_TOKENS
        )


@pytest.fixture
def tasks(arithmetic, alice):
    too_hard_tasks(arithmetic, alice)
    return arithmetic


def calibration_of(key: str) -> Calibration:
    return Calibration.objects.get(task_version__task__key=key)


def test_each_too_hard_task_gets_its_diagnosis_and_evidence(tasks, alice, model):
    too_hard_probe(tasks, alice, model)
    prose, boxed, long = calibration_of("prose"), calibration_of("boxed"), calibration_of("long")
    assert {prose.band, boxed.band, long.band} == {Band.TOO_HARD}
    assert (prose.diagnosis, boxed.diagnosis, long.diagnosis) == (
        Diagnosis.SUSPECT_VERIFIER,
        Diagnosis.HARD,
        Diagnosis.TRUNCATED,
    )
    evidence = prose.diagnosis_evidence
    assert evidence["attempts"] == 16 and evidence["refused_right"] == 16 and evidence["truncated"] == 0
    ids = set(Rollout.objects.filter(task_version=prose.task_version).values_list("id", flat=True))
    assert evidence["examples"] and {example["rollout"] for example in evidence["examples"]} <= ids
    assert evidence["examples"][0]["answer"] == "42" and "the answer is 42" in evidence["examples"][0]["excerpt"]
    assert long.diagnosis_evidence["truncated"] == 16
    assert boxed.diagnosis_evidence["read"] == 16 and boxed.diagnosis_evidence["refused_right"] == 0


def test_the_diagnosis_follows_the_band(tasks, alice, model):
    too_hard_probe(tasks, alice, model)
    services.environment_thresholds_set(environment=tasks, floor=0.001, retire_at=0.7, by=alice)
    prose = calibration_of("prose")
    assert prose.band != Band.TOO_HARD and prose.diagnosis == "" and prose.diagnosis_evidence == {}
    services.environment_thresholds_set(environment=tasks, floor=0.3, retire_at=0.7, by=alice)
    assert calibration_of("prose").diagnosis == Diagnosis.SUSPECT_VERIFIER


def test_pruned_rollouts_keep_the_diagnosis_their_texts_showed(tasks, alice, model):
    campaign = too_hard_probe(tasks, alice, model)
    services.rollouts_prune(older_than=timedelta(0), keep_per_task=0, campaign_id=campaign.pk)
    assert not Rollout.objects.filter(campaign=campaign, pruned_at=None).exists()
    services.environment_thresholds_set(environment=tasks, floor=0.25, retire_at=0.7, by=alice)
    prose = calibration_of("prose")
    assert prose.band == Band.TOO_HARD and prose.diagnosis == Diagnosis.SUSPECT_VERIFIER
    assert prose.diagnosis_evidence["refused_right"] == 16


def test_the_command_diagnoses_calibrations_banded_before_diagnoses_existed(tasks, alice, model, capsys):
    too_hard_probe(tasks, alice, model)
    Calibration.objects.update(diagnosis="", diagnosis_evidence={})
    call_command("diagnose_too_hard")
    assert "3 too_hard calibrations diagnosed." in capsys.readouterr().out
    assert calibration_of("prose").diagnosis == Diagnosis.SUSPECT_VERIFIER
    assert calibration_of("long").diagnosis == Diagnosis.TRUNCATED
    call_command("diagnose_too_hard")
    assert "0 too_hard calibrations diagnosed." in capsys.readouterr().out


def test_a_diagnosis_is_reused_while_the_attempts_are_the_same_and_recomputed_on_request(tasks, alice, model):
    """Re-banding reads no texts again: the diagnosis depends on the attempts, not on the thresholds."""
    too_hard_probe(tasks, alice, model)
    prose = calibration_of("prose")
    assert (
        prose.diagnosis_evidence["latest_rollout"]
        == Rollout.objects.filter(task_version=prose.task_version).latest("id").id
    )
    Calibration.objects.filter(pk=prose.pk).update(diagnosis_evidence={**prose.diagnosis_evidence, "reason": "kept"})
    services.environment_thresholds_set(environment=tasks, floor=0.25, retire_at=0.7, by=alice)
    assert calibration_of("prose").diagnosis_evidence["reason"] == "kept"
    call_command("diagnose_too_hard", "--all")
    assert calibration_of("prose").diagnosis_evidence["reason"].startswith("16 of 16 refused completions")


def test_the_task_filter_selects_by_diagnosis_on_lists_and_exports(tasks, alice, model):
    too_hard_probe(tasks, alice, model)
    task_filter = task_filters.task_filter_parse({"environment": "arithmetic", "diagnosis": "suspect_verifier"})
    assert [task.key for task in task_filters.tasks_matching(user=alice, task_filter=task_filter)] == ["prose"]
    assert task_filter.query()["diagnosis"] == "suspect_verifier"
    truncated = task_filters.task_filter_parse({"environment": "arithmetic", "diagnosis": "truncated"})
    exported = export_versions(task_filter=truncated, user=alice)
    assert [record["task_key"] for record in exported] == ["long"]
    with pytest.raises(task_filters.TaskFilterError, match="diagnosis: 'broken' is not one of suspect_verifier"):
        task_filters.task_filter_parse({"diagnosis": "broken"})
