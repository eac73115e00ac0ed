"""End to end through a real Celery worker: a campaign's rounds generate, verify and band in the worker,
which stores each too_hard task's diagnosis with its band."""

import pytest

from calibration import services
from calibration.models import Band, Calibration, Campaign, Diagnosis
from tests.factories import TOO_HARD_MAX_NEW_TOKENS, too_hard_answer, too_hard_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.workers]


@pytest.mark.django_db(transaction=True)
def test_a_worker_stores_the_diagnosis_with_the_band(arithmetic, alice, tmp_path):
    flush_broker()
    too_hard_tasks(arithmetic, alice)
    with serve_openai(respond=too_hard_answer, record_requests=False) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=TOO_HARD_MAX_NEW_TOKENS
        )
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=16, round_size=8, seed=3
        )
        with running_worker(log_path=tmp_path / "worker.log"):
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
                timeout=240,
                what="the worker to finish the campaign",
            )
    diagnoses = dict(Calibration.objects.filter(probe_model=model).values_list("task_version__task__key", "diagnosis"))
    assert diagnoses == {"prose": Diagnosis.SUSPECT_VERIFIER, "boxed": Diagnosis.HARD, "long": Diagnosis.TRUNCATED}
    assert set(Calibration.objects.filter(probe_model=model).values_list("band", flat=True)) == {Band.TOO_HARD}
    prose = Calibration.objects.get(probe_model=model, task_version__task__key="prose")
    assert prose.diagnosis_evidence["attempts"] == 16 and prose.diagnosis_evidence["refused_right"] == 16
