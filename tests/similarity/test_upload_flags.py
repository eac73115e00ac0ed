"""At upload, a paraphrase of a task already in the corpus is flagged near-duplicate, a HumanEval copy contaminated."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from curation.models import Task
from similarity.models import SimilarityFlag, VersionSignature
from tests.factories import jsonl
from tests.similarity.texts import APPLES, CARPET, TRAIN, TRAIN_OTHER_NUMBERS, TRAIN_PARAPHRASE, humaneval, task

pytestmark = pytest.mark.django_db


def upload(client, data: bytes, capture) -> None:
    with capture(execute=True) as callbacks:
        response = client.post(
            reverse("task_upload"),
            {"environment": "arithmetic", "file": SimpleUploadedFile("tasks.jsonl", data)},
        )
    assert response.status_code == 200, response.content.decode()[:2000]
    assert len(callbacks) == 1  # one check per upload, queued after the commit


def flags_of(key: str) -> dict[str, SimilarityFlag]:
    version = Task.objects.get(key=key).current_version
    return {flag.kind: flag for flag in SimilarityFlag.objects.filter(task_version=version)}


def test_paraphrase_and_humaneval_copy_are_flagged_at_upload(
    client, arithmetic, alice, eager, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    upload(client, jsonl(task("train", TRAIN), task("apples", APPLES, "8")), django_capture_on_commit_callbacks)
    assert VersionSignature.objects.count() == 2
    assert flags_of("train") == {} and flags_of("apples") == {}

    copied = humaneval("HumanEval/2")
    upload(
        client,
        jsonl(
            task("train-again", TRAIN_PARAPHRASE),
            task("train-faster", TRAIN_OTHER_NUMBERS),
            task("carpet", CARPET, "360"),
            task("truncate", "Solve this in Python:\n\n" + copied["prompt"]),
        ),
        django_capture_on_commit_callbacks,
    )
    assert VersionSignature.objects.count() == 6

    duplicate = flags_of("train-again")[SimilarityFlag.Kind.NEAR_DUPLICATE]
    assert duplicate.neighbour == Task.objects.get(key="train").current_version
    assert duplicate.cosine >= 0.9
    # Same template, other numbers: another task, not a duplicate. Unrelated tasks: no flag at all.
    assert flags_of("train-faster") == {}
    assert flags_of("carpet") == {}

    contaminated = flags_of("truncate")[SimilarityFlag.Kind.CONTAMINATED]
    assert (contaminated.reference_source, contaminated.reference_item) == ("HumanEval", "HumanEval/2")
    assert contaminated.reference_text == copied["prompt"]
    assert contaminated.shared_ngrams > 0 and contaminated.ngram_overlap > 0.8
    assert SimilarityFlag.Kind.NEAR_DUPLICATE not in flags_of("truncate")

    # The task page shows the neighbour and the matching benchmark item with its overlap.
    page = client.get(reverse("task_detail", args=["arithmetic", "truncate"])).content.decode()
    assert "HumanEval/2" in page and "13-gram" in page
    page = client.get(reverse("task_detail", args=["arithmetic", "train-again"])).content.decode()
    assert "Near-duplicate" in page and "arithmetic/train" in page


def test_the_check_is_idempotent_and_a_recheck_keeps_the_flags(arithmetic, alice, eager):
    from similarity import services
    from tests.factories import import_tasks

    import_tasks(arithmetic, alice, task("train", TRAIN), task("train-again", TRAIN_PARAPHRASE))
    first = services.versions_index()
    assert first.indexed == 2 and first.near_duplicates == 2  # within one file, each is the other's neighbour
    assert services.versions_index().indexed == 0
    again = services.versions_index(recheck=True)
    assert again.checked == 2 and again.near_duplicates == 2
    assert SimilarityFlag.objects.filter(kind=SimilarityFlag.Kind.NEAR_DUPLICATE).count() == 2


def test_versions_signed_by_a_job_that_died_before_checking_are_checked_next_time(
    arithmetic, alice, eager, monkeypatch
):
    from similarity import services
    from tests.factories import import_tasks

    import_tasks(arithmetic, alice, task("train", TRAIN), task("train-again", TRAIN_PARAPHRASE))

    def die(version_ids, result):
        raise RuntimeError("worker killed")

    with monkeypatch.context() as patched:
        patched.setattr(services, "_versions_check", die)
        with pytest.raises(RuntimeError):
            services.versions_index()
    assert VersionSignature.objects.count() == 2 and not SimilarityFlag.objects.exists()
    rerun = services.versions_index()
    assert rerun.indexed == 0 and rerun.checked == 2 and rerun.near_duplicates == 2
    assert services.versions_index().checked == 0  # checked once, not again


def test_background_import_job_is_checked_too(
    arithmetic, alice, eager, settings, tmp_path, django_capture_on_commit_callbacks
):
    from curation import import_jobs

    settings.MEDIA_ROOT = tmp_path
    with django_capture_on_commit_callbacks(execute=False) as queued:
        job = import_jobs.import_job_create(
            environment=arithmetic,
            owner=alice,
            upload=SimpleUploadedFile("big.jsonl", jsonl(task("train", TRAIN), task("train-again", TRAIN_PARAPHRASE))),
            run_audits=False,
        )
    assert len(queued) == 1
    with django_capture_on_commit_callbacks(execute=True) as checks:
        import_jobs.import_job_run(job_id=job.pk)
    assert len(checks) == 1
    assert SimilarityFlag.Kind.NEAR_DUPLICATE in flags_of("train-again")


def test_an_edited_version_is_checked_after_its_commit(arithmetic, alice, eager, django_capture_on_commit_callbacks):
    from curation.services import task_version_edit
    from tests.factories import import_tasks

    import_tasks(arithmetic, alice, task("train", TRAIN), task("apples", APPLES, "8"))
    apples = Task.objects.get(key="apples")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        task_version_edit(task=apples, by=alice, content=task("apples", TRAIN_PARAPHRASE))
    assert len(callbacks) == 1
    apples.refresh_from_db()
    assert apples.current_version.number == 2
    flag = flags_of("apples")[SimilarityFlag.Kind.NEAR_DUPLICATE]
    assert flag.neighbour == Task.objects.get(key="train").current_version
