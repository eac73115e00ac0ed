"""manage.py similarity_index: sign what is missing, recheck, rebuild; a bad environment is named."""

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from similarity.models import SimilarityFlag, VersionSignature
from tests.factories import import_tasks
from tests.similarity.texts import APPLES, TRAIN, TRAIN_PARAPHRASE, task

pytestmark = pytest.mark.django_db


def run(capsys, *args) -> str:
    call_command("similarity_index", *args)
    return capsys.readouterr().out


def test_command_signs_rechecks_and_rebuilds(arithmetic, alice, capsys):
    import_tasks(arithmetic, alice, task("train", TRAIN), task("train-again", TRAIN_PARAPHRASE), task("apples", APPLES))
    assert "3 versions indexed, 3 checked: 2 near-duplicates, 0 contaminated" in run(
        capsys, "--environment", "arithmetic"
    )
    assert "0 versions indexed, 0 checked" in run(capsys)
    assert "0 versions indexed, 3 checked: 2 near-duplicates" in run(capsys, "--recheck")
    first_ids = set(VersionSignature.objects.values_list("pk", flat=True))
    output = run(capsys, "--rebuild")
    assert "Dropped 3 signatures." in output and "3 versions indexed, 3 checked: 2 near-duplicates" in output
    assert not first_ids & set(VersionSignature.objects.values_list("pk", flat=True))
    assert SimilarityFlag.objects.filter(kind="near_duplicate").count() == 2


def test_unknown_environment_is_named():
    with pytest.raises(CommandError, match="--environment: no environment 'nowhere'"):
        call_command("similarity_index", "--environment", "nowhere")


def test_a_recheck_under_stricter_thresholds_clears_the_open_flags_only(arithmetic, alice, capsys, settings):
    import_tasks(arithmetic, alice, task("train", TRAIN), task("train-again", TRAIN_PARAPHRASE), task("apples", APPLES))
    run(capsys)
    flags = SimilarityFlag.objects.filter(kind="near_duplicate").order_by("task_version_id")
    assert flags.count() == 2
    resolved = flags.first()
    SimilarityFlag.objects.filter(pk=resolved.pk).update(resolved_at=timezone.now(), resolution="kept")
    settings.PASSBAND_DUPLICATE_JACCARD, settings.PASSBAND_DUPLICATE_COSINE = 1.01, 1.01  # nothing is close enough
    assert "0 versions indexed, 3 checked: 0 near-duplicates" in run(capsys, "--recheck")
    assert list(SimilarityFlag.objects.values_list("pk", flat=True)) == [resolved.pk]  # a reviewer's resolution stays
