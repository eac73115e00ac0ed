"""/metrics and /healthz: who may scrape, and counters that move when a worker runs a campaign."""

import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from calibration import services
from calibration.models import Campaign
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai
from tests.support.workers import ROOT, flush_broker, running_worker, test_database_url, wait_for


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


def test_make_run_names_a_metrics_folder_for_every_process_and_empties_it(tmp_path):
    """scripts/run-local.sh with a stand-in interpreter that records what each process was started with."""
    log = tmp_path / "started.txt"
    python = tmp_path / "python"
    # The web server's stand-in waits a moment: the script stops the workers once it returns. The workers' and
    # beat's stand-ins run until they are stopped, so the supervisor never starts them again.
    python.write_text(
        f'#!/bin/sh\necho "$PROMETHEUS_MULTIPROC_DIR $*" >> {log}\n'
        '[ "$1" = manage.py ] && exec sleep 2\n[ "$1" = -m ] && exec sleep 60\nexit 0\n'
    )
    python.chmod(0o755)
    var = tmp_path / "var"
    (var / "metrics").mkdir(parents=True)
    (var / "metrics" / "counter_old-run-1.db").write_bytes(b"stale")
    env = {**os.environ, "PASSBAND_VAR_DIR": str(var)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    subprocess.run(["bash", str(ROOT / "scripts" / "run-local.sh"), str(python)], cwd=tmp_path, env=env, timeout=60)
    lines = log.read_text().splitlines()
    processes = [line for line in lines if " -m celery " in line or " manage.py runserver " in line]
    assert len(processes) == 5, lines  # three workers, beat and the web server (and the script's readiness wait)
    assert all(line.startswith(f"{var / 'metrics'} ") for line in lines), lines
    assert not (var / "metrics" / "counter_old-run-1.db").exists()


@pytest.mark.django_db(transaction=True)
def test_embedded_default_metrics_filesystem_broker_and_prefork_workers(
    client, arithmetic, alice, staff, settings, tmp_path
):
    """`make run`'s setup: SQLite or PostgreSQL, the filesystem broker and a metrics folder. Real worker
    processes sample a campaign; /metrics shows the queue filling and emptying and the workers' counters."""
    var = tmp_path / "var"
    metrics_dir = var / "metrics"
    metrics_dir.mkdir(parents=True)
    embedded = {
        "CELERY_BROKER_URL": "filesystem://",
        "PASSBAND_VAR_DIR": str(var),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    settings.PASSBAND_METRICS_DIR = str(metrics_dir)
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(var / "broker" / "queue")}
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"w-{i}", "prompt": f"Say a word ({i}).", "answer": "42", "verifier": {"kind": "exact"}}
            for i in range(3)
        ],
    )
    staff.is_superuser = True  # the calibrate command's campaigns belong to a superuser
    staff.save()
    client.force_login(staff)
    with serve_openai(eos_probability=0.3) as base_url:
        services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=24
        )
        started = subprocess.run(
            [sys.executable, "manage.py", "calibrate", "--environment", "arithmetic", "--model", "fake"]
            + ["--rollouts", "4", "--round-size", "4"],
            cwd=ROOT,
            env={**os.environ, **embedded, "DATABASE_URL": test_database_url()},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert started.returncode == 0, started.stderr
        queued = samples(client.get("/metrics").content.decode())
        assert total(queued, "passband_queue_depth", queue="generate") >= 1
        assert total(queued, "passband_queue_depth", queue="verify") == 0
        campaign = Campaign.objects.get()
        with running_worker(queues="default,generate,verify", concurrency=2, extra_env=embedded):
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
                timeout=180,
                what="the campaign",
            )
    after = samples(client.get("/metrics").content.decode())
    assert total(after, "passband_rollouts_generated_total", model="fake") == 12
    assert total(after, "passband_rollouts_verified_total", kind="exact") == 12
    assert total(after, "passband_verifier_seconds_count", kind="exact") == 12
    assert total(after, "passband_model_requests_total", result="ok") >= 1
    assert total(after, "passband_queue_depth", queue="generate") == 0
    assert total(after, "passband_campaigns", status="done") == 1


@pytest.mark.django_db
def test_a_broker_metrics_cannot_read_says_so(client, staff, settings):
    settings.CELERY_BROKER_URL = "amqp://guest@127.0.0.1:1//"
    client.force_login(staff)
    text = client.get("/metrics").content.decode()
    assert "Not read for the amqp broker" in text
