"""The storage full or failing: an upload that cannot be stored says so and leaves nothing behind; a release
whose files cannot all be stored fails with the reason, shows no half-written files and builds on retry;
each failure is counted on /metrics."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from calibration.models import ProbeModel
from curation.models import ImportJob
from releases import services as releases
from releases import tasks as release_tasks
from releases.models import Release
from tests.factories import gsm8k_rows, jsonl
from tests.releases.export_data import calibrated_environment
from tests.support.faulty_storage import FullAfter

pytestmark = pytest.mark.django_db


@pytest.fixture
def faulty_storage(settings, media):
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "tests.support.faulty_storage.FullAfter"},
    }
    yield FullAfter
    FullAfter.saves_left = None


def failures(client, staff, operation: str) -> float:
    from tests.calibration.test_metrics import samples, total

    client.force_login(staff)
    return total(
        samples(client.get("/metrics").content.decode()), "passband_storage_failures_total", operation=operation
    )


def test_an_upload_the_storage_cannot_keep_says_so_and_leaves_nothing(
    client, alice, staff, arithmetic, faulty_storage, settings
):
    settings.PASSBAND_IMPORT_INLINE_BYTES = 10  # every upload goes to the storage, for a background import
    before = failures(client, staff, "imports")
    faulty_storage.saves_left = 0
    client.force_login(alice)
    upload = SimpleUploadedFile("gsm8k.jsonl", jsonl(*gsm8k_rows(5)))
    response = client.post("/tasks/upload/", {"environment": "arithmetic", "file": upload})
    assert response.status_code == 503
    page = response.content.decode()
    assert (
        "gsm8k.jsonl: The file could not be stored (OSError: [Errno 28] No space left on device); nothing was kept."
        in page
    )
    assert not ImportJob.objects.exists()
    assert not (settings.MEDIA_ROOT / "imports").exists() or not any((settings.MEDIA_ROOT / "imports").iterdir())
    assert failures(client, staff, "imports") == before + 1
    # Once the storage has room again, the same upload goes through.
    faulty_storage.saves_left = None
    client.force_login(alice)
    upload = SimpleUploadedFile("gsm8k.jsonl", jsonl(*gsm8k_rows(5)))
    response = client.post("/tasks/upload/", {"environment": "arithmetic", "file": upload})
    assert response.status_code == 302 and ImportJob.objects.count() == 1


def test_a_release_whose_files_cannot_all_be_stored_fails_whole_and_builds_on_retry(
    client, alice, charlie, staff, arithmetic, faulty_storage, settings
):
    calibrated_environment(arithmetic, alice)
    release = releases.release_create(user=charlie, probe_model=ProbeModel.objects.get(name="probe"))
    before = failures(client, staff, "releases")
    faulty_storage.saves_left = 3  # the storage fills up after the third of the eight files
    with pytest.raises(Exception, match="could not be stored"):
        release_tasks.build_release(release.pk)
    release.refresh_from_db()
    assert release.status == "failed" and "No space left on device" in release.error
    assert release.files_folder == ""
    stored = settings.MEDIA_ROOT / "releases"
    assert not stored.exists() or not any(path.is_file() for path in stored.rglob("*"))  # no half-written files
    assert failures(client, staff, "releases") == before + 1
    faulty_storage.saves_left = None
    releases.release_retry(release=release)
    assert release_tasks.build_release(release.pk) == "ready"
    release.refresh_from_db()
    client.force_login(charlie)
    assert client.get(f"/releases/{release.pk}/files/trl.jsonl").status_code == 200
    assert Release.objects.get(pk=release.pk).manifest["files"]["trl.jsonl"]["rows"] == 2
