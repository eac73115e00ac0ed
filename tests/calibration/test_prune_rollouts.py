"""prune_rollouts: old payloads go, verdicts stay, and calibrations recompute to the same values."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from calibration import services
from calibration.models import Calibration, Campaign, Rollout
from curation.models import TaskVersion
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai


def calibrations(model):
    return sorted(
        Calibration.objects.filter(probe_model=model).values_list(
            "task_version_id", "attempts", "successes", "pass_rate", "interval_low", "interval_high", "band", "cost_usd"
        )
    )


@pytest.fixture
def probed(arithmetic, alice):
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
    with serve_openai(eos_probability=0.3) as base_url:
        model = services.probe_model_add(
            name="fake",
            backend="openai",
            base_url=base_url,
            model="fake-model",
            max_new_tokens=24,
            usd_per_million_output_tokens=0.4,
        )
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=6, round_size=6, seed=1, enqueue=False
        )
        services.campaign_run_inline(campaign=campaign)
    Rollout.objects.update(created_at=timezone.now() - timedelta(days=40))
    return campaign, model


@pytest.mark.django_db
def test_pruning_keeps_verdicts_counts_and_calibrations(probed):
    campaign, model = probed
    before = calibrations(model)
    assert services.rollouts_prune(older_than=timedelta(days=30), keep_per_task=2, dry_run=True) == 12
    assert Rollout.objects.filter(pruned_at__isnull=False).count() == 0
    assert services.rollouts_prune(older_than=timedelta(days=30), keep_per_task=2, batch_size=5) == 12
    assert Rollout.objects.filter(campaign=campaign).count() == 18
    kept = Rollout.objects.filter(sample_index__lt=2)
    assert kept.count() == 6 and all(r.logprobs is not None and r.pruned_at is None for r in kept)
    for rollout in Rollout.objects.filter(sample_index__gte=2):
        assert rollout.pruned_at is not None and rollout.outcome in ("pass", "fail")
        assert rollout.logprobs is None and rollout.completion_token_ids is None and rollout.text == ""
        assert rollout.output_tokens and rollout.cost_usd > 0
    versions = list(TaskVersion.objects.filter(rollouts__campaign=campaign).distinct())
    services.calibrations_refresh(task_versions=versions, probe_model=model)
    assert calibrations(model) == before
    assert services.rollouts_prune(older_than=timedelta(days=30)) == 0  # nothing twice


@pytest.mark.django_db
def test_recent_rollouts_and_running_campaigns_are_left_alone(probed):
    campaign, _ = probed
    assert services.rollouts_prune(older_than=timedelta(days=60)) == 0
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.RUNNING)
    assert services.rollouts_prune(older_than=timedelta(days=30)) == 0


@pytest.mark.django_db
def test_the_command_reports_what_it_pruned(probed, capsys):
    call_command("prune_rollouts", "--older-than-days", "30", "--keep-per-task", "0", "--dry-run")
    assert "would prune 18 rollout(s)" in capsys.readouterr().out
    call_command("prune_rollouts", "--older-than-days", "30", "--keep-per-task", "0")
    assert "pruned 18 rollout(s)" in capsys.readouterr().out
