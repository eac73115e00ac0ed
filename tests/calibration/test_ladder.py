"""Model ladder: a cheap model's calibration as the prior for a strong one.

Under the default (calibrated) stopping rule a prior never decides a band, so the ladder neither
saves nor costs rollouts: it is off the default decision path (docs/calibration.md).
"""

import math

import pytest

from calibration import services
from calibration.errors import CalibrationError
from calibration.models import Calibration, CampaignItem, Rollout
from tests.calibration.scripted import import_scripted, scripted_model

SHIFT = 1.5  # the strong model is this much better on the logit scale


def strong_rate(rate: float) -> float:
    if rate in (0.0, 1.0):
        return rate
    return 1 / (1 + math.exp(-(math.log(rate / (1 - rate)) + SHIFT)))


CHEAP_RATES = [0.0] * 12 + [0.01] * 4 + [0.05] * 4 + [0.15] * 4 + [0.3] * 4 + [0.5] * 4 + [1.0] * 8
CHEAP = {f"t{index:02d}": rate for index, rate in enumerate(CHEAP_RATES)}
STRONG = {key: strong_rate(rate) for key, rate in CHEAP.items()}


def versions(environment, keys):
    return [task.current_version for task in environment.tasks.filter(key__in=keys).order_by("key")]


@pytest.mark.django_db
def test_ladder_prior_leaves_the_default_rule_s_rollouts_and_bands_alone(arithmetic, alice):
    import_scripted(arithmetic, alice, CHEAP)
    keys = sorted(CHEAP)
    sample, rest = keys[::3], [key for index, key in enumerate(keys) if index % 3]
    with scripted_model("cheap", CHEAP) as (cheap, _), scripted_model("strong", STRONG) as (strong, server):
        # A cap of 32 rollouts still leaves tasks in every band (retire, in band, borderline); what the ladder
        # does at full caps on the demo ladder: bench/calibration/ladder.py.
        start = dict(environment=arithmetic, created_by=alice, policy="adaptive", rollouts=32, enqueue=False)
        services.campaign_run_inline(campaign=services.campaign_start(probe_model=cheap, seed=1, **start))
        with pytest.raises(CalibrationError, match="probe a sample"):
            services.campaign_start_ladder(
                environment=arithmetic, probe_model=strong, cheap_model=cheap, created_by=alice
            )
        services.campaign_run_inline(
            campaign=services.campaign_start(
                probe_model=strong, seed=2, task_versions=versions(arithmetic, sample), **start
            )
        )
        ladder = services.ladder_fit(environment=arithmetic, cheap_model=cheap, strong_model=strong)
        # Half the sampled tasks sit at 0% or 100%, where a logit shift moves nothing: the fit lands
        # between no shift and the true one, never below nor far above.
        assert ladder.tasks == len(sample) and 0 < ladder.shift < 3

        with_ladder = services.campaign_start_ladder(
            environment=arithmetic,
            probe_model=strong,
            cheap_model=cheap,
            created_by=alice,
            rollouts=32,
            seed=3,
            enqueue=False,
        )
        assert sorted(with_ladder.items.values_list("task_version__task__key", flat=True)) == rest
        assert not CampaignItem.objects.filter(campaign=with_ladder, prior__isnull=True).exists()
        services.campaign_run_inline(campaign=with_ladder)

        # The same strong model without the ladder, on the same tasks and the same outcome stream (same seed).
        plain_model = services.probe_model_add(
            name="strong-plain", backend="openai", base_url=server.base_url, model="fake-model"
        )
        plain = services.campaign_start(
            probe_model=plain_model, seed=3, task_versions=versions(arithmetic, rest), **start
        )
        services.campaign_run_inline(campaign=plain)

    ladder_rollouts = Rollout.objects.filter(campaign=with_ladder).count()
    plain_rollouts = Rollout.objects.filter(campaign=plain).count()
    assert ladder_rollouts == plain_rollouts
    bands = {
        model: dict(
            Calibration.objects.filter(probe_model__name=model, task_version__task__key__in=rest).values_list(
                "task_version__task__key", "band"
            )
        )
        for model in ("strong", "strong-plain")
    }
    assert bands["strong"] == bands["strong-plain"]
