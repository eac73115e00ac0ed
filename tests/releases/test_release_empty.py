"""An empty release is refused unless asked for, warns when built, and its files still read."""

import json

import pyarrow.parquet as pq
import pytest

from accounts.services import api_token_create
from engine import formats
from releases import services, tasks
from releases.models import Release
from tests.releases.export_data import calibrated_environment

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def post(client, charlie, django_capture_on_commit_callbacks, **body):
    secret = api_token_create(user=charlie, name="t", scopes=["read", "export"])[1]
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            "/api/v1/releases", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )
    return response, secret


def test_a_release_nothing_matches_is_refused_with_the_reason(
    client, charlie, arithmetic, alice, django_capture_on_commit_callbacks
):
    calibrated_environment(arithmetic, alice)
    response, _ = post(client, charlie, django_capture_on_commit_callbacks, probe_model="probe", band="too_hard")
    assert response.status_code == 400
    assert (
        "No task matches (status approved, band too_hard under probe, every environment): nothing to release"
        in response.json()["detail"]
    )
    assert not Release.objects.exists()


def test_an_empty_release_on_request_warns_and_every_file_reads(
    client, charlie, arithmetic, alice, django_capture_on_commit_callbacks
):
    calibrated_environment(arithmetic, alice)
    response, secret = post(
        client, charlie, django_capture_on_commit_callbacks, probe_model="probe", band="too_hard", allow_empty=True
    )
    assert response.status_code == 202
    release = Release.objects.get()
    assert tasks.build_release(release.pk) == "ready"
    release.refresh_from_db()  # the build named the folder its files are in
    body = client.get(f"/api/v1/releases/{release.pk}", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert body["manifest"]["tasks"] == 0 and "This release is empty" in body["warnings"][0]
    for format in formats.names():
        path = services.release_file_path(release=release, format=format, file_type="parquet")
        parquet = pq.ParquetFile(path)
        # The full schema and no row group: no reader is asked for batches of zero rows.
        assert parquet.metadata.num_row_groups == 0 and parquet.schema_arrow == formats.arrow_schema(format)
        assert pq.read_table(path).num_rows == 0
        assert services.release_file_path(release=release, format=format, file_type="jsonl").read_bytes() == b""


def test_a_release_with_tasks_has_no_warnings(client, charlie, arithmetic, alice, django_capture_on_commit_callbacks):
    calibrated_environment(arithmetic, alice)
    response, secret = post(client, charlie, django_capture_on_commit_callbacks, probe_model="probe")
    release = Release.objects.get()
    tasks.build_release(release.pk)
    assert client.get(f"/api/v1/releases/{release.pk}", HTTP_AUTHORIZATION=f"Bearer {secret}").json()["warnings"] == []
