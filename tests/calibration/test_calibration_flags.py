"""Flags: verifier trouble (a setting), zero variance, and a strong model failing an audited task."""

import pytest

from calibration import services
from calibration.models import Band, Calibration, Outcome, Rollout
from tests.calibration.scripted import import_scripted, scripted_model, scripted_task
from tests.factories import import_tasks


def stored_outcomes(campaign, version, outcomes):
    Rollout.objects.bulk_create(
        Rollout(
            campaign=campaign,
            task_version=version,
            probe_model=campaign.probe_model,
            sample_index=index,
            seed=index,
            outcome=outcome,
        )
        for index, outcome in enumerate(outcomes)
    )
    return services.calibration_refresh(
        task_version=version, probe_model=campaign.probe_model, policy=services.policy_for(campaign)
    )


@pytest.mark.django_db
def test_verifier_trouble_share_is_a_setting(arithmetic, alice, settings):
    import_scripted(arithmetic, alice, ["broken"])
    version = arithmetic.tasks.get().current_version
    with scripted_model("scripted", {}) as (model, _server):
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=96, enqueue=False
        )
    # 25% of verdicts are errors; 72 failures are enough to call a task too hard.
    outcomes = [Outcome.FAIL] * 72 + [Outcome.ERROR, Outcome.TIMEOUT] * 12
    calibration = stored_outcomes(campaign, version, outcomes)
    assert "verifier_trouble" in calibration.flags and calibration.band == Band.UNDECIDED  # not called hard
    assert calibration.verifier_errors == 24 and "zero_variance" in calibration.flags
    settings.PASSBAND_VERIFIER_TROUBLE_SHARE = 0.3
    calibration = services.calibration_refresh(task_version=version, probe_model=model)
    assert "verifier_trouble" not in calibration.flags and calibration.band == Band.TOO_HARD


@pytest.mark.django_db
@pytest.mark.parametrize("strong", [True, False])
def test_strong_model_failing_an_audited_task_flags_it_for_review(arithmetic, alice, strong):
    import_tasks(arithmetic, alice, scripted_task("unfair"), scripted_task("fine"), run_audits=True)
    assert all(task.current_version.audit_passed for task in arithmetic.tasks.all())
    with scripted_model("frontier", {"unfair": 0.0, "fine": 0.5}, strong=strong) as (model, _server):
        campaign = services.campaign_start(
            # 72 failures decide too_hard; 8 would leave the task undecided, and the flag needs the band.
            environment=arithmetic,
            probe_model=model,
            created_by=alice,
            rollouts=72,
            seed=1,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    flags = {
        c.task_version.task.key: c.flags
        for c in Calibration.objects.filter(probe_model=model).select_related("task_version__task")
    }
    assert ("strong_model_fails" in flags["unfair"]) == strong
    assert "strong_model_fails" not in flags["fine"]
