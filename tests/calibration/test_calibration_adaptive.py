"""Adaptive sampling end to end, on scripted outcome streams, and the environment's population prior."""

import pytest
from django.core.cache import cache
from django.core.management import call_command

from calibration import services
from calibration.models import Band, Calibration, Outcome, Rollout
from engine import stats
from tests.calibration.scripted import import_scripted, scripted_model

RATES = {"never": 0.0, "always": 1.0, "half": 0.5, "edge": 0.03}


def stop_point(outcomes: list[bool], *, cap: int, thresholds: stats.Thresholds) -> tuple[int, str]:
    """Replay a stored outcome stream round by round: where should sampling have stopped, and why."""
    policy = stats.SamplingPolicy(kind="adaptive", round_size=8, cap=cap)
    for end in range(8, cap + 1, 8):
        assessment = stats.assess(successes=sum(outcomes[:end]), attempts=end, thresholds=thresholds, policy=policy)
        if assessment.next_round == 0:
            return end, assessment.band
    raise AssertionError("the policy never stopped")


@pytest.mark.django_db
@pytest.mark.parametrize("cap", [16, 96])
def test_adaptive_stops_as_soon_as_the_band_is_decided(arithmetic, alice, cap):
    import_scripted(arithmetic, alice, RATES)
    with scripted_model("scripted", RATES) as (model, _server):
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            policy="adaptive",
            rollouts=cap,
            seed=21,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    campaign.refresh_from_db()
    assert campaign.status == "done"
    thresholds = services.thresholds_for(arithmetic)
    labels = {}
    for calibration in Calibration.objects.filter(probe_model=model).select_related("task_version__task"):
        stream = list(
            Rollout.objects.filter(task_version=calibration.task_version)
            .order_by("sample_index")
            .values_list("outcome", flat=True)
        )
        expected_rollouts, expected_band = stop_point(
            [o == Outcome.PASS for o in stream], cap=cap, thresholds=thresholds
        )
        assert len(stream) == expected_rollouts == calibration.attempts
        assert calibration.band == expected_band
        assert calibration.decided == (expected_band != Band.BORDERLINE)
        labels[calibration.task_version.task.key] = calibration.band
    assert labels["always"] == Band.RETIRE and labels["half"] == Band.IN_BAND
    if cap == 16:
        # 0 of 16 cannot certify "below 4%": both near-zero tasks end borderline at the cap.
        assert labels["never"] == labels["edge"] == Band.BORDERLINE
    else:
        assert labels["never"] == Band.TOO_HARD


@pytest.mark.django_db
def test_calibrate_command_runs_adaptive_rounds(arithmetic, alice, django_user_model, capsys):
    django_user_model.objects.create_superuser(username="root", password="pw-root-1234")
    import_scripted(arithmetic, alice, ["always", "half"])
    with scripted_model("scripted", RATES):
        call_command(
            "calibrate",
            "--environment",
            "arithmetic",
            "--model",
            "scripted",
            "--policy",
            "adaptive",
            "--inline",
            "--seed",
            "4",
        )
    output = capsys.readouterr().out
    assert "adaptive 256" in output and "retire" in output and "in_band" in output
    assert Rollout.objects.count() < 2 * 256  # decided long before the cap


@pytest.mark.django_db
def test_population_prior_is_fitted_once_there_are_enough_tasks(arithmetic, alice, settings):
    settings.PASSBAND_PRIOR_MIN_TASKS = 6
    rates = {f"t{index}": rate for index, rate in enumerate([0.0, 0.0, 0.05, 0.1, 0.2, 0.4, 0.9])}
    import_scripted(arithmetic, alice, list(rates)[:5])
    with scripted_model("scripted", rates) as (model, _server):
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=16, seed=2, enqueue=False
        )
        services.campaign_run_inline(campaign=campaign)
        assert services.environment_prior(environment=arithmetic, probe_model=model) is None  # 5 < 6 tasks: Jeffreys
        import_scripted(arithmetic, alice, list(rates)[5:])
        campaign = services.campaign_start(
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            rollouts=16,
            seed=2,
            enqueue=False,
            task_versions=[task.current_version for task in arithmetic.tasks.filter(key__in=list(rates)[5:])],
        )
        services.campaign_run_inline(campaign=campaign)
    prior = services.environment_prior(environment=arithmetic, probe_model=model)
    assert prior is not None and prior.strength <= 8.0
    calibration = Calibration.objects.get(probe_model=model, task_version__task__key="t0")
    # The per-round refresh asked while there were too few tasks; that "no prior" was not kept, and
    # the fit from the second campaign's rounds is reused for a while.
    assert services.environment_prior(environment=arithmetic, probe_model=model, cached=True) is not None
    cache.clear()
    services.calibration_refresh(task_version=calibration.task_version, probe_model=model)
    calibration.refresh_from_db()
    with_prior = stats.posterior_interval(
        successes=calibration.successes, attempts=calibration.attempts, prior=prior, level=0.95
    )
    assert calibration.interval_high == pytest.approx(with_prior.high)
    jeffreys = stats.jeffreys_interval(successes=calibration.successes, attempts=calibration.attempts, level=0.95)
    assert calibration.interval_high != pytest.approx(jeffreys.high)
