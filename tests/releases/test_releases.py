"""Releases: POST /api/v1/releases pins versions, a Celery task builds the files, GET shows them."""

import hashlib
import io
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import api_token_create, api_token_revoke
from calibration.models import Calibration
from releases import services as releases_services
from releases import tasks
from releases.models import Release, ReleaseItem
from tests.conftest import make_user
from tests.factories import import_tasks, math_task
from tests.releases.export_data import calibrated_environment, predicted_calibration

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def model(arithmetic, alice):
    return calibrated_environment(arithmetic, alice)


@pytest.fixture
def secret(charlie):
    return api_token_create(user=charlie, name="trainer", scopes=["read", "export"])[1]


def auth(secret):
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def create(client, secret, django_capture_on_commit_callbacks, **body):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/api/v1/releases", body, content_type="application/json", **auth(secret))
    return response, callbacks


def test_release_defaults_to_approved_in_band_tasks_and_builds_files(
    client, secret, model, django_capture_on_commit_callbacks, media
):
    response, callbacks = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending" and body["files"] == {}
    assert len(callbacks) == 1  # the build is queued only once the release is committed
    release = Release.objects.get(pk=body["id"])
    assert sorted(release.items.values_list("task_version__task__key", flat=True)) == ["product", "sum"]

    assert tasks.build_release(release.pk) == "ready"
    body = client.get(f"/api/v1/releases/{release.pk}", **auth(secret)).json()
    manifest = body["manifest"]
    assert body["status"] == "ready"
    assert manifest["tasks"] == 2 and manifest["bands"] == {"in_band": 2} and manifest["domains"] == {"math": 2}
    assert manifest["filter"]["band"] == "in_band" and manifest["filter"]["status"] == "approved"
    assert manifest["thresholds"]["arithmetic"] == {"floor": 0.02, "retire_at": 0.7}
    assert manifest["created_by"] == "charlie" and manifest["probe_model"]["name"] == "probe"
    assert set(body["files"]) == {
        f"{f}.{t}" for f in ("native", "trl", "verifiers", "nemo_gym") for t in ("jsonl", "parquet")
    }

    for name, info in manifest["files"].items():
        download = client.get(f"/api/v1/releases/{release.pk}/files/{name}", **auth(secret))
        assert download.status_code == 200, download.content
        content = b"".join(download.streaming_content)
        assert hashlib.sha256(content).hexdigest() == info["sha256"] == download["X-Checksum-SHA256"]
        release.refresh_from_db()
        assert (releases_services.release_directory(release=release) / name).read_bytes() == content
    assert manifest["files"]["trl.jsonl"]["rows"] == 2
    # The release's own digest, of its files' names and digests: what the audit log's build row shows.
    files_digests = json.dumps({name: info["sha256"] for name, info in manifest["files"].items()}, sort_keys=True)
    assert manifest["sha256"] == hashlib.sha256(files_digests.encode()).hexdigest()
    build = AuditEvent.objects.get(object_kind="release", action="release_build")
    assert build.detail["sha256"] == manifest["sha256"]


def test_building_twice_changes_nothing(client, secret, model, django_capture_on_commit_callbacks):
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    release_id = response.json()["id"]
    tasks.build_release(release_id)
    first = Release.objects.get(pk=release_id).manifest
    tasks.build_release(release_id)
    assert Release.objects.get(pk=release_id).manifest == first


def test_later_edits_and_calibration_never_change_a_release(
    client, secret, model, arithmetic, alice, django_capture_on_commit_callbacks, media
):
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe", band="in_band")
    release_id = response.json()["id"]
    old_hash = arithmetic.tasks.get(key="sum").current_version.content_hash
    # After the release is made: the task gets a new version and its calibration moves.
    import_tasks(arithmetic, alice, math_task("sum", question="What is 20 + 30?", answer="50"))
    Calibration.objects.filter(task_version__task__key="product").update(pass_rate=0.9, band="retire")
    tasks.build_release(release_id)
    folder = releases_services.release_directory(release=Release.objects.get(pk=release_id))
    rows = [json.loads(line) for line in (folder / "trl.jsonl").read_text().splitlines()]
    by_key = {row["task_key"]: row for row in rows}
    assert by_key["sum"]["version_hash"] == old_hash and by_key["sum"]["answer"] == "5"
    assert by_key["product"]["calibration"]["band"] == "in_band"
    assert by_key["product"]["calibration"]["pass_rate"] == 2 / 8


def test_bad_requests_say_what_is_wrong(client, secret, model, django_capture_on_commit_callbacks):
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="nobody")
    assert response.status_code == 400 and "nobody" in response.json()["fields"]["probe_model"][0]
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe", band="hot")
    assert response.status_code == 400 and "band" in response.json()["fields"]
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe", environment="nowhere")
    assert response.status_code == 400 and "nowhere" in response.json()["fields"]["environment"][0]
    assert client.get("/api/v1/releases/999999", **auth(secret)).status_code == 404


def test_files_of_an_unbuilt_release_are_not_served(client, secret, model, django_capture_on_commit_callbacks):
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    release_id = response.json()["id"]
    assert client.get(f"/api/v1/releases/{release_id}/files/trl.jsonl", **auth(secret)).status_code == 409
    tasks.build_release(release_id)
    assert client.get(f"/api/v1/releases/{release_id}/files/trl.csv", **auth(secret)).status_code == 404


def test_missing_expired_revoked_and_wrong_scope_tokens_are_refused(
    client, charlie, model, django_capture_on_commit_callbacks
):
    assert client.post("/api/v1/releases", {"probe_model": "probe"}, content_type="application/json").status_code == 401
    assert (
        create(client, "pb_not-a-token", django_capture_on_commit_callbacks, probe_model="probe")[0].status_code == 401
    )
    token, secret = api_token_create(user=charlie, name="t", scopes=["export"])
    token.expires_at = timezone.now() - timedelta(seconds=1)
    token.save()
    assert create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")[0].status_code == 401
    token, secret = api_token_create(user=charlie, name="t", scopes=["export"])
    api_token_revoke(token=token)
    assert create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")[0].status_code == 401
    _, secret = api_token_create(user=charlie, name="t", scopes=["read"])
    assert create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")[0].status_code == 403
    assert Release.objects.count() == 0 and ReleaseItem.objects.count() == 0


def test_releases_are_for_trainers_and_staff(
    client, charlie, model, django_capture_on_commit_callbacks, django_user_model
):
    _, charlie_secret = api_token_create(user=charlie, name="a", scopes=["export"])
    response, _ = create(client, charlie_secret, django_capture_on_commit_callbacks, probe_model="probe")
    release_id = response.json()["id"]
    # Trainers share releases; authors (and users in no group) hold no export scope to read them with.
    erin = make_user(django_user_model, "erin", "trainers")
    _, erin_secret = api_token_create(user=erin, name="e", scopes=["export"])
    assert client.get(f"/api/v1/releases/{release_id}", **auth(erin_secret)).status_code == 200
    dave = make_user(django_user_model, "dave")
    _, dave_secret = api_token_create(user=dave, name="d", scopes=["read"])
    assert client.get(f"/api/v1/releases/{release_id}", **auth(dave_secret)).status_code == 403


def test_a_failed_build_is_marked_and_a_retry_finishes_it(
    client, secret, model, django_capture_on_commit_callbacks, monkeypatch, media
):
    from engine import formats

    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    release_id = response.json()["id"]
    real_write_file = formats.write_file

    def disk_full(**kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(formats, "write_file", disk_full)
    with pytest.raises(OSError):
        tasks.build_release(release_id)
    body = client.get(f"/api/v1/releases/{release_id}", **auth(secret)).json()
    assert body["status"] == "failed" and "No space left" in body["error"]
    # No half-written file left behind, on this disk or in the storage.
    assert not (media / "releases").exists() or not any(path.is_file() for path in (media / "releases").rglob("*"))

    monkeypatch.setattr(formats, "write_file", real_write_file)
    with django_capture_on_commit_callbacks() as queued:
        retried = client.post(f"/api/v1/releases/{release_id}/retry", **auth(secret))
    assert retried.status_code == 202 and retried.json()["status"] == "pending" and len(queued) == 1
    assert tasks.build_release(release_id) == "ready"
    assert Release.objects.get(pk=release_id).error == ""
    assert client.post(f"/api/v1/releases/{release_id}/retry", **auth(secret)).status_code == 409


def test_list_shows_own_releases_newest_first(
    client, secret, model, django_user_model, django_capture_on_commit_callbacks
):
    first = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")[0].json()["id"]
    second = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe", band="retire")[0].json()[
        "id"
    ]
    body = client.get("/api/v1/releases", **auth(secret)).json()
    assert [row["id"] for row in body["results"]] == [second, first]
    erin = make_user(django_user_model, "erin", "trainers")
    _, erin_secret = api_token_create(user=erin, name="e", scopes=["export"])
    assert [row["id"] for row in client.get("/api/v1/releases", **auth(erin_secret)).json()["results"]] == [
        second,
        first,
    ]


def test_a_build_that_keeps_finding_the_database_busy_ends_failed_not_pending(
    client, secret, model, django_capture_on_commit_callbacks, monkeypatch
):
    from django.db import OperationalError

    from releases import services as release_services

    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    release_id = response.json()["id"]

    def locked(**kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(release_services, "release_build", locked)
    # The last allowed try (retries == max_retries) gives up, and says why.
    result = tasks.build_release.apply(args=(release_id,), retries=tasks.build_release.max_retries)
    assert result.failed()
    release = Release.objects.get(pk=release_id)
    assert release.status == "failed" and "database is locked" in release.error


def test_tasks_with_too_few_attempts_for_their_band_are_left_out_and_named(
    client, secret, model, django_capture_on_commit_callbacks
):
    """A calibration from before bands needed the stopping rule: 2 passes in 4 stored as in_band."""
    Calibration.objects.filter(task_version__task__key="product").update(attempts=4, successes=2, pass_rate=0.5)
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    assert response.status_code == 202, response.content
    release = Release.objects.get(pk=response.json()["id"])
    assert list(release.items.values_list("task_version__task__key", flat=True)) == ["sum"]
    assert tasks.build_release(release.pk) == "ready"
    release.refresh_from_db()
    [warning] = release.manifest["warnings"]
    assert "1 task(s) have too few attempts for their band" in warning and "left out" in warning
    assert warning.endswith("product") and release.manifest["tasks"] == 1

    response, _ = create(
        client, secret, django_capture_on_commit_callbacks, probe_model="probe", include_thin_evidence=True
    )
    release = Release.objects.get(pk=response.json()["id"])
    assert sorted(release.items.values_list("task_version__task__key", flat=True)) == ["product", "sum"]
    assert tasks.build_release(release.pk) == "ready"
    release.refresh_from_db()
    assert "included because the release asked for them" in release.manifest["warnings"][0]
    assert release.manifest["filter"]["include_thin_evidence"] is True


def test_a_release_of_only_thin_evidence_is_refused_with_the_reason(
    client, secret, model, django_capture_on_commit_callbacks
):
    Calibration.objects.filter(band="in_band").update(attempts=4, successes=2, pass_rate=0.5)
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    assert response.status_code == 400
    assert "too few attempts for its band" in response.json()["detail"]
    assert not Release.objects.exists()


def test_a_predicted_band_is_pinned_and_marked_in_the_release_files_and_the_api_rows(
    client, secret, model, arithmetic, django_capture_on_commit_callbacks
):
    """A checkpoint's band predicted by the item-response model (no rollouts, a probability at least the
    re-profile's level) is pinned like a probed one, not left out as thin evidence, and every row says so."""
    predicted_calibration(arithmetic, model, "tool-add")
    response, _ = create(client, secret, django_capture_on_commit_callbacks, probe_model="probe")
    release = Release.objects.get(pk=response.json()["id"])
    pinned = dict(release.items.values_list("task_version__task__key", "predicted_probability"))
    assert pinned == {"sum": None, "product": None, "tool-add": 0.97}
    assert tasks.build_release(release.pk) == "ready"
    manifest = client.get(f"/api/v1/releases/{release.pk}", **auth(secret)).json()["manifest"]
    assert manifest["bands"] == {"in_band": 3} and manifest["predicted_bands"] == 1 and manifest["warnings"] == []
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet")
    for name in manifest["files"]:
        download = client.get(f"/api/v1/releases/{release.pk}/files/{name}", **auth(secret))
        content = b"".join(download.streaming_content)
        if name.endswith(".jsonl"):
            rows = [json.loads(line) for line in content.splitlines()]
        else:
            rows = pyarrow_parquet.read_table(io.BytesIO(content)).to_pylist()
        marks = sorted((row["calibration"]["band_predicted"], row["calibration"]["attempts"]) for row in rows)
        assert marks == [(False, 8), (False, 8), (True, 0)], name

    calibrations = client.get("/api/v1/calibrations", {"model": "probe"}, **auth(secret)).json()["results"]
    by_key = {row["task"]: row for row in calibrations}
    assert by_key["tool-add"]["band_predicted"] is True and by_key["tool-add"]["predicted_probability"] == 0.97
    assert by_key["sum"]["band_predicted"] is False and by_key["sum"]["predicted_probability"] is None
    listed = client.get("/api/v1/tasks", {"model": "probe"}, **auth(secret)).json()["results"]
    marks = {row["key"]: (row["calibration"] or {}).get("band_predicted") for row in listed}
    assert marks["tool-add"] is True and marks["sum"] is False
