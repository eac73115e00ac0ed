"""Files through object storage, with no disk shared between the web process and the workers, and workers on
two hosts sharing only the database, the broker and the bucket.

A real S3-compatible server (moto's, in its own process) holds the bucket. The test process plays the web
app with the bucket as its default storage; the Celery worker is another process with a var folder (hence
MEDIA_ROOT) of its own, so the only way it can read an upload or hand back a release file is the bucket.
"""

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import boto3
import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Count
from prometheus_client.parser import text_string_to_metric_families

from calibration import services
from calibration.models import Campaign, ProbeModel, Rollout
from curation import import_jobs
from curation.models import ImportJob, Task
from releases import services as releases
from releases.models import Release
from tests.factories import import_tasks, jsonl, math_task
from tests.releases.export_data import calibrated_environment
from tests.support.openai_server import serve_openai
from tests.support.s3_server import CREDENTIALS, REGION, s3_server, storage_settings
from tests.support.workers import flush_broker, running_worker, start_worker, stop_worker, wait_for

pytestmark = [pytest.mark.workers, pytest.mark.django_db(transaction=True)]

BUCKET = "passband-files"


@pytest.fixture
def bucket(settings, monkeypatch, tmp_path):
    """The bucket on a fresh S3 server, as this process's default storage; yields (endpoint, boto3 client)."""
    with s3_server() as endpoint:
        for name, value in CREDENTIALS.items():
            monkeypatch.setenv(name, value)
        client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        settings.STORAGES = {
            **settings.STORAGES,
            "default": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {
                    "bucket_name": BUCKET,
                    "endpoint_url": endpoint,
                    "region_name": REGION,
                    "file_overwrite": False,
                    "default_acl": None,
                    "signature_version": "s3v4",
                },
            },
        }
        settings.MEDIA_ROOT = tmp_path / "web-host-media"
        yield endpoint, client


def keys(client, prefix: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def worker_on_another_host(endpoint, tmp_path):
    """A worker with its own var folder: it shares the database, the broker and the bucket, nothing else."""
    return running_worker(
        queues="default,generate,verify",
        extra_env={**storage_settings(endpoint=endpoint, bucket=BUCKET), "PASSBAND_VAR_DIR": str(tmp_path / "worker")},
        log_path=tmp_path / "worker.log",
    )


def test_a_background_import_runs_on_a_worker_that_cannot_see_the_web_process_files(
    bucket, alice, arithmetic, tmp_path
):
    endpoint, client = bucket
    flush_broker()
    lines = [math_task(f"sum-{index}", question=f"What is {index} + 1?", answer=str(index + 1)) for index in range(30)]
    job = import_jobs.import_job_create(
        environment=arithmetic, owner=alice, upload=SimpleUploadedFile("sums.jsonl", jsonl(*lines))
    )
    # The upload is in the bucket, not on the web process's disk.
    assert keys(client, "imports/") == [job.path] and job.path.startswith("imports/")
    assert not (tmp_path / "web-host-media").exists()
    with worker_on_another_host(endpoint, tmp_path):
        wait_for(
            lambda: ImportJob.objects.get(pk=job.pk).status in (ImportJob.Status.DONE, ImportJob.Status.FAILED),
            timeout=180,
            what="the worker to import the upload",
        )
        # The upload is dropped once imported: the job's end is written first, then the upload deleted.
        wait_for(lambda: keys(client, "imports/") == [], timeout=60, what="the worker to drop the upload")
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE, (job.error, job.report)
    assert Task.objects.filter(environment=arithmetic).count() == 30
    assert not (tmp_path / "worker" / "media").exists()  # and the worker never wrote it to its own disk


def test_a_release_built_on_another_host_downloads_streamed_and_by_signed_url(
    bucket, alice, arithmetic, charlie, client, settings, tmp_path
):
    endpoint, s3 = bucket
    flush_broker()
    calibrated_environment(arithmetic, alice)
    release = releases.release_create(user=charlie, probe_model=ProbeModel.objects.get(name="probe"))
    with worker_on_another_host(endpoint, tmp_path):
        wait_for(
            lambda: Release.objects.get(pk=release.pk).status in ("ready", "failed"),
            timeout=180,
            what="the worker to build the release",
        )
    release.refresh_from_db()
    assert release.status == "ready", release.error
    names = sorted(release.manifest["files"])
    assert keys(s3, f"releases/{release.pk}/") == [f"{release.files_folder}/{name}" for name in names]

    client.force_login(charlie)
    for name in names:
        response = client.get(f"/releases/{release.pk}/files/{name}")
        assert response.status_code == 200
        content = b"".join(response.streaming_content)
        assert hashlib.sha256(content).hexdigest() == release.manifest["files"][name]["sha256"]

    settings.PASSBAND_STORAGE_SIGNED_DOWNLOADS = True
    response = client.get(f"/releases/{release.pk}/files/trl.parquet")
    assert response.status_code == 302 and response["Location"].startswith(f"{endpoint}/{BUCKET}/")
    assert "X-Amz-Signature=" in response["Location"]
    signed = httpx.get(response["Location"], timeout=30)
    assert signed.status_code == 200
    assert hashlib.sha256(signed.content).hexdigest() == release.manifest["files"]["trl.parquet"]["sha256"]
    assert 'filename="release-' in signed.headers["content-disposition"]


def test_a_campaign_on_two_worker_hosts_completes_exactly_once(bucket, alice, arithmetic, tmp_path):
    """The web process and two workers as if on three machines: each its own working directory, var folder
    (MEDIA_ROOT), temp folder and metrics folder; only the database, the broker and the bucket are shared."""
    endpoint, _ = bucket
    flush_broker()
    tasks, rollouts = 24, 8
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t-{i}", "prompt": f"Say {i}.", "answer": "42", "verifier": {"kind": "exact"}}
            for i in range(tasks)
        ],
    )
    hosts = {}
    for name in ("host-a", "host-b"):
        home = tmp_path / name
        for folder in ("cwd", "var", "tmp", "metrics"):
            (home / folder).mkdir(parents=True)
        hosts[name] = home
    with serve_openai(latency_s=0.02, record_requests=False) as base_url:
        model = services.probe_model_add(name="fake", backend="openai", base_url=base_url, model="m", max_new_tokens=8)
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=rollouts, round_size=4, seed=3
        )
        workers = [
            start_worker(
                concurrency=1,
                name=name,
                cwd=home / "cwd",
                log_path=home / "worker.log",
                extra_env={
                    **storage_settings(endpoint=endpoint, bucket=BUCKET),
                    "PASSBAND_VAR_DIR": str(home / "var"),
                    "TMPDIR": str(home / "tmp"),
                    "PROMETHEUS_MULTIPROC_DIR": str(home / "metrics"),
                    "PASSBAND_TASKS_PER_JOB": "3",
                },
            )
            for name, home in hosts.items()
        ]
        try:
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
                timeout=300,
                what="the two workers to finish the campaign",
            )
        finally:
            for worker in workers:
                stop_worker(worker)
    per_task = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert sorted((row["n"], row["distinct"]) for row in per_task) == [(rollouts, rollouts)] * tasks
    # Both hosts did part of the work, each counting it in its own metrics folder, served on that host by
    # `manage.py serve_metrics`: scraped one by one, as Prometheus does, they count every rollout once.
    counted = {}
    for name, home in hosts.items():
        assert "succeeded" in (home / "worker.log").read_text(), name
        with host_metrics(home / "metrics", token="scrape-token") as url:
            assert httpx.get(url).status_code == 401
            scraped = httpx.get(url, headers={"Authorization": "Bearer scrape-token"})
        samples = [sample for family in text_string_to_metric_families(scraped.text) for sample in family.samples]
        counted[name] = {
            counter: sum(sample.value for sample in samples if sample.name == f"passband_rollouts_{counter}_total")
            for counter in ("generated", "verified")
        }
    for counter in ("generated", "verified"):
        assert sum(host[counter] for host in counted.values()) == tasks * rollouts, counted
    assert not (tmp_path / "web-host-media").exists()


@contextlib.contextmanager
def host_metrics(folder, *, token: str):
    """`manage.py serve_metrics` on a free port for `folder`; yields its /metrics URL."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve_metrics", "--port", "0"],
        cwd=Path(__file__).parents[1],
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PASSBAND_METRICS_TOKEN": token},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert "serving" in line, line
        yield line.split()[-1]
    finally:
        process.terminate()
        process.wait(timeout=30)
