"""Thresholds per environment: a change re-bands tasks from stored rollouts, with no inference."""

import pytest
from django.core.management import CommandError, call_command

from accounts.errors import ServiceError
from calibration import services
from calibration.models import Band, Calibration, Rollout
from engine import stats
from tests.calibration.scripted import import_scripted, scripted_model

RATES = {"never": 0.0, "half": 0.5, "always": 1.0}


def bands(model) -> dict[str, str]:
    return {
        c.task_version.task.key: c.band
        for c in Calibration.objects.filter(probe_model=model).select_related("task_version__task")
    }


@pytest.mark.django_db
def test_threshold_change_rebands_without_inference(arithmetic, alice):
    import_scripted(arithmetic, alice, RATES)
    with scripted_model("scripted", RATES) as (model, server):
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            rollouts=16,
            round_size=8,
            seed=7,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
        half = Calibration.objects.get(probe_model=model, task_version__task__key="half")
        assert 0.3 <= half.pass_rate < 0.7
        # 16 failures do not prove a pass rate under the floor zone (that takes 72): undecided, not too_hard.
        assert bands(model) == {"never": Band.UNDECIDED, "half": Band.IN_BAND, "always": Band.RETIRE}
        rollouts, requests = Rollout.objects.count(), server.request_count

        refreshed = services.environment_thresholds_set(environment=arithmetic, floor=0.02, retire_at=0.3, by=alice)

        assert refreshed == 3
        assert bands(model)["half"] == Band.RETIRE  # about half pass: above the new retire zone's 0.2
        assert Rollout.objects.count() == rollouts and server.request_count == requests  # no inference
        arithmetic.refresh_from_db()
        assert (arithmetic.floor, arithmetic.retire_at) == (0.02, 0.3)
        half.refresh_from_db()
        assert half.policy["kind"] == "fixed" and half.attempts == 16  # the stored policy is kept


@pytest.mark.django_db
def test_adaptive_calibration_keeps_its_policy_when_rebanded(arithmetic, alice):
    import_scripted(arithmetic, alice, ["half"])
    with scripted_model("scripted", {"half": 0.5}) as (model, _server):
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            policy="adaptive",
            rollouts=64,
            seed=3,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    calibration = Calibration.objects.get(probe_model=model)
    assert calibration.band == Band.IN_BAND and calibration.decided
    services.environment_thresholds_set(environment=arithmetic, floor=0.6, retire_at=0.9, by=None)
    calibration.refresh_from_db()
    expected = stats.assess(
        successes=calibration.successes,
        attempts=calibration.attempts,
        thresholds=stats.Thresholds.with_default_zones(floor=0.6, retire_at=0.9),
        policy=stats.SamplingPolicy(kind="adaptive", cap=64),
    )
    assert calibration.policy["kind"] == "adaptive"
    assert calibration.band == expected.band == Band.TOO_HARD


@pytest.mark.django_db
@pytest.mark.parametrize("floor, retire_at", [(0, 0.7), (0.7, 0.7), (0.5, 0.2), (0.02, 1.0), ("x", 0.7)])
def test_thresholds_are_validated(arithmetic, floor, retire_at):
    with pytest.raises(ServiceError, match="floor"):
        services.environment_thresholds_set(environment=arithmetic, floor=floor, retire_at=retire_at, by=None)
    arithmetic.refresh_from_db()
    assert (arithmetic.floor, arithmetic.retire_at) == (0.02, 0.7)


@pytest.mark.django_db
def test_set_thresholds_command(arithmetic, capsys):
    call_command("set_thresholds", "arithmetic", "--floor", "0.03", "--retire-at", "0.65")
    arithmetic.refresh_from_db()
    assert (arithmetic.floor, arithmetic.retire_at) == (0.03, 0.65)
    with pytest.raises(CommandError, match="0 < floor < retire_at < 1"):
        call_command("set_thresholds", "arithmetic", "--floor", "0.5", "--retire-at", "0.4")
