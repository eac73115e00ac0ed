"""calibration/costs.py: what a rollout, a task, an in-band task and a probe cost, recomputed by hand."""

from decimal import ROUND_HALF_UP, Decimal

import pytest

from accounts.services import api_token_create
from calibration import costs, selectors, services
from calibration.models import Calibration, Rollout
from tests.factories import import_tasks, math_task, rollouts_with
from tests.support.openai_server import serve_openai

GPU = costs.Price(usd_per_gpu_hour=Decimal(3600), gpus=2)  # $2 per second of device time
TOKENS = costs.Price(usd_per_million_input_tokens=Decimal(1000), usd_per_million_output_tokens=Decimal(2000))


def test_a_rollout_pays_its_device_time_and_its_tokens():
    assert costs.rollout_cost(price=GPU, device_ms=1500, input_tokens=10, output_tokens=20) == Decimal("3.00000000")
    assert costs.rollout_cost(price=TOKENS, device_ms=1500, input_tokens=10, output_tokens=20) == Decimal("0.05")
    both = costs.Price(usd_per_gpu_hour=Decimal(3600), usd_per_million_output_tokens=Decimal(1_000_000))
    assert costs.rollout_cost(price=both, device_ms=500, input_tokens=None, output_tokens=3) == Decimal("3.50000000")


def test_a_batch_is_paid_once_and_split_by_the_tokens_each_sample_generated():
    shares = costs.device_time_shares(seconds=2.0, output_tokens=[9, 19, None, 0])
    assert shares == pytest.approx(
        [625.0, 1250.0, 62.5, 62.5]
    )  # weights 10, 20, 1, 1 and sum(shares) == pytest.approx(2000.0)
    assert costs.device_time_shares(seconds=1.0, output_tokens=[]) == []


def test_per_in_band_task_leaves_out_the_authoring_of_tasks_never_probed():
    assert costs.per_in_band_task(probed_authoring_usd=30.0, probing_usd=0.6, in_band_tasks=3) == pytest.approx(10.2)
    assert costs.per_in_band_task(probed_authoring_usd=30.0, probing_usd=0.6, in_band_tasks=0) is None
    assert costs.per_task(12.0, 4) == 3.0 and costs.per_task(12.0, 0) is None


def test_no_history_estimate_prices_the_gpu_time_and_gives_a_time():
    """A model priced by the GPU-hour with no rollouts: not $0, and a time from the assumed speed."""
    estimate = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, history=None, assumed_tokens_per_second=50
    )
    # 100 tokens at 50 per second: 2 s of device time each, $4 each at $2 per second.
    assert estimate.cost_usd == pytest.approx(160.0) and estimate.seconds == pytest.approx(80.0)
    assert "assumed 50 tokens per second" in estimate.basis and "no rollouts" in estimate.basis
    history = costs.History(rollouts=8, mean_cost_usd=Decimal("0.5"), seconds_per_rollout=1.5)
    known = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, history=history, assumed_tokens_per_second=50
    )
    assert (known.cost_usd, known.seconds) == (20.0, 60.0) and "8 stored rollouts" in known.basis


@pytest.mark.django_db
def test_a_campaigns_spend_is_recomputed_from_its_rollouts(client, arithmetic, alice):
    """Every figure of a finished campaign, added up again from its rollouts with costs.rollout_cost."""
    import_tasks(
        arithmetic,
        alice,
        *[{"key": f"t{i}", "prompt": f"Say 42 ({i})", "answer": "42", "verifier": {"kind": "exact"}} for i in range(3)],
    )
    with serve_openai(latency_s=0.02) as base_url:
        model = services.probe_model_add(
            name="gpu-and-tokens",
            backend="openai",
            base_url=base_url,
            model="fake-model",
            usd_per_gpu_hour=3600,
            gpus=2,
            usd_per_million_input_tokens=1000,
            usd_per_million_output_tokens=2000,
        )
        before = selectors.probe_estimate(probe_model=model, tasks=3, rollouts=4, max_new_tokens=64)
        assert before["cost_usd"] > 0 and before["seconds"] > 0  # priced by the hour, no history: not $0
        campaign = services.campaign_start(
            environment=arithmetic, probe_model=model, created_by=alice, rollouts=4, round_size=4, seed=5, enqueue=False
        )
        services.campaign_run_inline(campaign=campaign)
    price = costs.Price.of(model)
    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == 12 and all(rollout.device_ms and rollout.device_ms > 0 for rollout in rollouts)
    recomputed = {
        rollout.pk: costs.rollout_cost(
            price=price,
            device_ms=rollout.device_ms,
            input_tokens=rollout.input_tokens,
            output_tokens=rollout.output_tokens,
        )
        for rollout in rollouts
    }
    assert all(rollout.cost_usd == recomputed[rollout.pk] for rollout in rollouts)
    total = sum(recomputed.values())
    assert Decimal(str(selectors.campaign_progress(campaign=campaign)["cost"])) == pytest.approx(total)
    by_version: dict[int, Decimal] = {}
    for rollout in rollouts:
        by_version[rollout.task_version_id] = by_version.get(rollout.task_version_id, 0) + recomputed[rollout.pk]
    for calibration in Calibration.objects.filter(probe_model=model):
        # Half up, on either engine (a sum ending in a 5 at the 7th place once failed on PostgreSQL's rounding).
        assert calibration.cost_usd == by_version[calibration.task_version_id].quantize(
            Decimal("0.000001"), rounding=ROUND_HALF_UP
        )
    spend = selectors.environment_costs(environment=arithmetic, probe_model=model)
    assert spend["probe_usd"] == pytest.approx(float(total))
    # The API gives each rollout's device time and cost, so a trainer can recompute the same sums.
    secret = api_token_create(user=alice, name="costs", scopes=["read"])[1]
    body = client.get("/api/v1/rollouts", {"campaign": campaign.pk}, HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    listed = {row["id"]: row for row in body["results"]}
    assert len(listed) == 12
    for rollout in rollouts:
        row = listed[rollout.pk]
        again = costs.rollout_cost(
            price=price,
            device_ms=row["device_ms"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
        )
        assert again == Decimal(str(row["cost_usd"])) == rollout.cost_usd
    # Within a batch (here: one task's round), a rollout that generated more tokens was charged more of
    # its device time.
    for version_id in by_version:
        batch = sorted((r for r in rollouts if r.task_version_id == version_id), key=lambda r: r.output_tokens)
        for shorter, longer in zip(batch, batch[1:]):
            if longer.output_tokens > shorter.output_tokens:
                assert longer.device_ms > shorter.device_ms and longer.cost_usd > shorter.cost_usd
    # The next estimate's time comes from the campaign's start to its last verdict, never 0 s.
    after = selectors.probe_estimate(probe_model=model, tasks=3, rollouts=4, max_new_tokens=64)
    assert after["seconds"] > 0 and "pace of its latest campaign" in after["basis"] and after["measured"]
    assert "output tokens per second per request" in after["basis"]
    assert after["cost_usd"] == pytest.approx(float(total), rel=1e-6)


@pytest.mark.django_db
def test_cost_per_in_band_task_counts_the_authoring_of_probed_tasks_only(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1), "authoring_cost_usd": 10}
            for i in range(5)
        ],
    )
    model = services.probe_model_add(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
    for key, band in (("t0", "in_band"), ("t1", "too_hard")):
        Calibration.objects.create(
            task_version=arithmetic.tasks.get(key=key).current_version, probe_model=model, band=band, attempts=60
        )
    spend = selectors.environment_costs(environment=arithmetic, probe_model=model)
    assert spend["tasks"] == 5 and spend["probed_tasks"] == 2 and spend["in_band_tasks"] == 1
    assert spend["authoring_usd"] == 50.0
    assert spend["cost_per_in_band_task_usd"] == pytest.approx(20.0)  # two probed tasks' authoring, one in band
    dashboard = selectors.cost_summary(environment=arithmetic, probe_model=model)["environments"][0]
    assert dashboard["cost_per_in_band_task_usd"] == spend["cost_per_in_band_task_usd"]


def test_a_first_estimate_says_it_has_no_measured_speed_and_states_a_range_with_loading():
    first = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, history=None, assumed_tokens_per_second=50,
        load_seconds=300,
    )  # fmt: skip
    assert not first.measured and "no measured speed for gpu yet" in first.basis and "300 s to load" in first.basis
    low, high = first.seconds_range
    # Shortest: 12.5 tokens at 200 per second; longest: 100 tokens at 25 per second, plus loading.
    assert low == pytest.approx(40 * 12.5 / 200) and high == pytest.approx(40 * 100 / 25 + 300)
    assert low < first.seconds < high and first.cost_range[0] < first.cost_usd < first.cost_range[1]
    measured = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, assumed_tokens_per_second=50,
        history=costs.History(rollouts=8, mean_cost_usd=Decimal("0.5"), seconds_per_rollout=0.5,
                              tokens_per_second=120, request_seconds=2.0),
    )  # fmt: skip
    assert measured.measured and measured.seconds_range is None
    assert "120 output tokens per second per request, 2.00 s per request, about 4.0 at once" in measured.basis


def test_an_adaptive_estimate_counts_the_expected_rollouts_and_ranges_from_one_round_to_the_cap():
    expected = costs.Expected(rollouts=10.0, fewest=4, basis="the stopping rule's expected rollouts per task: …")
    guess = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, history=None, assumed_tokens_per_second=50,
        expected=expected,
    )  # fmt: skip
    # 10 rollouts of 100 tokens at 50 per second: 20 s, $40; the range from 4 short fast ones to 40 long slow ones.
    assert guess.rollouts == 40 and guess.expected_rollouts == 10.0
    assert (guess.cost_usd, guess.seconds) == (pytest.approx(40.0), pytest.approx(20.0))
    assert guess.seconds_range == (pytest.approx(4 * 12.5 / 200), pytest.approx(40 * 100 / 25))
    assert "10 of at most 40 rollouts" in guess.basis and expected.basis in guess.basis
    measured = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, assumed_tokens_per_second=50,
        history=costs.History(rollouts=8, mean_cost_usd=Decimal("0.5"), seconds_per_rollout=1.5), expected=expected,
    )  # fmt: skip
    assert (measured.cost_usd, measured.seconds) == (5.0, 15.0) and measured.as_dict()[
        "rollouts_basis"
    ] == expected.basis
    fixed = costs.probe_estimate(
        model_name="gpu", price=GPU, rollouts=40, max_new_tokens=100, history=None, assumed_tokens_per_second=50
    )
    assert fixed.as_dict()["expected_rollouts"] == 40 and fixed.as_dict()["rollouts_basis"] == ""


@pytest.mark.django_db
def test_a_calibrations_cost_rounds_a_half_up_on_either_engine(arithmetic, alice):
    """Rollouts cost to 8 places and a calibration to 6: two rollouts adding up to a 5 in the 7th place give the
    same calibration cost on PostgreSQL (which rounds numerics half away from zero) and SQLite (whose adapter
    rounds to even)."""
    import_tasks(arithmetic, alice, math_task("half"))
    task = arithmetic.tasks.get(key="half")
    first, second = rollouts_with(task, alice, ["pass", "fail"])
    Rollout.objects.filter(pk=first.pk).update(cost_usd=Decimal("0.34987025"))
    Rollout.objects.filter(pk=second.pk).update(cost_usd=Decimal("0.00000025"))  # 0.3498705 in all
    model = first.probe_model
    calibration = services.calibration_refresh(task_version=task.current_version, probe_model=model)
    assert calibration.cost_usd == Decimal("0.349871")
    assert Calibration.objects.get(pk=calibration.pk).cost_usd == Decimal("0.349871")
