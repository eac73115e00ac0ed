"""manage.py add_probe_model --run --checkpoint-step and manage.py reprofile_checkpoint (with --release: only the
task versions a release pins)."""

from io import StringIO
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from calibration.models import Calibration, Campaign, ProbeModel, Reprofile
from curation.services import environment_create
from tests.factories import checkpoint_run, import_tasks, math_task, pinned_release

pytestmark = pytest.mark.django_db


def add(name, *options):
    call_command(
        "add_probe_model",
        name,
        "--backend",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "fake",
        *options,
        stdout=StringIO(),
    )


def test_checkpoints_are_added_with_their_run_and_step_and_reprofiled_from_the_earlier_ones(
    arithmetic, alice, django_user_model
):
    import_tasks(
        arithmetic, alice, *[math_task(f"t-{index}", f"What is {index} + 1?", str(index + 1)) for index in range(5)]
    )
    add("ckpt-1", "--run", "run-a", "--checkpoint-step", "100")
    add("ckpt-2", "--run", "run-a", "--checkpoint-step", "200")
    with pytest.raises(CommandError, match="already has a checkpoint at step 200"):
        add("again", "--run", "run-a", "--checkpoint-step", "200")
    with pytest.raises(CommandError, match="both its run and its checkpoint step"):
        add("half", "--run", "run-a")
    assert list(ProbeModel.objects.filter(run="run-a").values_list("name", "checkpoint_step")) == [
        ("ckpt-1", 100),
        ("ckpt-2", 200),
    ]
    reprofile = ["reprofile_checkpoint", "--environment", "arithmetic", "--model", "ckpt-2", "--sample", "2"]
    with pytest.raises(CommandError, match="Create a superuser first"):
        call_command(*reprofile)
    django_user_model.objects.create_superuser(username="root", password="pw-root")
    with pytest.raises(CommandError, match="No earlier checkpoint of run run-a has probed these tasks"):
        call_command(*reprofile)
    first = ProbeModel.objects.get(name="ckpt-1")
    for task in arithmetic.tasks.all():
        Calibration.objects.create(task_version=task.current_version, probe_model=first, attempts=16, successes=4)
    out = StringIO()
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        call_command(*reprofile, "--seed", "1", stdout=out)
    campaign = Campaign.objects.get(probe_model__name="ckpt-2")
    assert campaign.items.count() == 2 and campaign.policy == Campaign.Policy.ADAPTIVE
    assert f"Campaign {campaign.pk} probes a sample of 2 tasks with ckpt-2" in out.getvalue()
    with pytest.raises(CommandError, match=f"Campaign {campaign.pk} still probes arithmetic"):
        call_command(*reprofile)


def test_reprofile_checkpoint_with_a_release_takes_only_the_tasks_it_pins(arithmetic, alice, django_user_model):
    first, _ = checkpoint_run(arithmetic, alice)
    django_user_model.objects.create_superuser(username="root", password="pw-root")
    pinned = [task.current_version for task in arithmetic.tasks.order_by("key")[:6]]
    release = pinned_release(alice, first, pinned, environment=arithmetic)
    geometry = environment_create(name="geometry", domain="math", default_verifier={"kind": "math"})
    import_tasks(geometry, alice, math_task("g-1", "What is 2 + 2?", "4"))
    elsewhere = pinned_release(alice, first, [geometry.tasks.get().current_version], environment=geometry)
    reprofile = ["reprofile_checkpoint", "--environment", "arithmetic", "--model", "ckpt-2", "--sample", "4"]

    with pytest.raises(CommandError, match=r"^No release 999999\.$"):
        call_command(*reprofile, "--release", "999999")
    with pytest.raises(CommandError, match=f"Release {elsewhere.pk} pins no task of arithmetic"):
        call_command(*reprofile, "--release", str(elsewhere.pk))
    assert not Reprofile.objects.exists() and not Campaign.objects.exists()

    out = StringIO()
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        call_command(*reprofile, "--release", str(release.pk), "--seed", "1", stdout=out)
    started = Reprofile.objects.get()
    assert started.release_id == release.pk
    assert started.task_version_ids == sorted(version.pk for version in pinned) and started.tasks == 6
    sampled = set(started.sample_campaign.items.values_list("task_version_id", flat=True))
    assert len(sampled) == 4 and sampled <= set(started.task_version_ids)
    assert (
        f"probes a sample of 4 tasks with ckpt-2; when it is done, a worker takes the next step by itself "
        f"(re-profile {started.pk})" in out.getvalue()
    )
