"""/metrics and /healthz: who may scrape, and counters that move when a worker runs a campaign."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from calibration import services
from calibration.models import Campaign
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import flush_broker, running_worker, wait_for


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of an exposition text."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(found: dict[tuple, float], name: str, **labels: str) -> float:
    return sum(
        value
        for (sample, sample_labels), value in found.items()
        if sample == name and all(dict(sample_labels).get(key) == wanted for key, wanted in labels.items())
    )


@pytest.mark.django_db
def test_metrics_answer_staff_and_the_token_only(client, alice, staff, settings):
    settings.PASSBAND_METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    client.force_login(alice)
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").status_code == 200
    client.force_login(staff)
    assert client.get("/metrics").status_code == 200


@pytest.mark.django_db
def test_no_token_configured_lets_no_bearer_in(client, settings):
    settings.PASSBAND_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


@pytest.mark.django_db
def test_healthz_checks_database_and_broker(client, settings):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "database": "ok", "broker": "ok"}
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["broker"] == "fail" and response.json()["database"] == "ok"


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_counters_of_prefork_workers_move_after_a_small_campaign(client, arithmetic, alice, staff, settings, tmp_path):
    """A real prefork worker in multiprocess mode: its children's counters reach the web's /metrics."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    settings.PASSBAND_METRICS_DIR = str(metrics_dir)
    flush_broker()
    import_tasks(
        arithmetic,
        alice,
        *[
            {
                "key": f"w-{i}",
                "prompt": f"Say a word ({i}).",
                "answer": "42",
                "verifier": {"kind": "regex", "pattern": r"\b42\b", "mode": "search"},
            }
            for i in range(3)
        ],
    )
    with serve_openai(eos_probability=0.3, fail_first=1, fail_with=503) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=24
        )
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, seed=5
        )
        client.force_login(staff)
        before = samples(client.get("/metrics").content.decode())
        assert total(before, "passband_campaign_items", campaign=str(campaign.pk), state="open") == 3
        with running_worker(
            queues="default,generate,verify", concurrency=2, extra_env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        ):
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
                timeout=120,
                what="the campaign",
            )
    after = samples(client.get("/metrics").content.decode())
    assert total(after, "passband_rollouts_generated_total", model="fake") == 12
    assert total(after, "passband_rollouts_verified_total", kind="regex") == 12
    assert total(after, "passband_verifier_seconds_count", kind="regex") == 12
    assert total(after, "passband_model_requests_total", result="ok") >= 1
    assert total(after, "passband_model_retries_total", reason="http_503") == 1
    assert {dict(labels)["queue"] for name, labels in after if name == "passband_queue_depth"} == {
        "default",
        "generate",
        "verify",
        "similarity",
    }
    assert total(after, "passband_campaigns", status="done") >= 1
    assert total(before, "passband_rollouts_generated_total") == 0
