"""The real probe path: SmolLM2 on the CPU, math-verify, calibration, inline and through a worker."""

import types

import pytest

from calibration import selectors, services
from calibration.models import Band, Calibration, Campaign, Outcome, Rollout
from engine.packing import unpack_logprobs, unpack_tokens
from tests.factories import import_tasks, math_task
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.model, pytest.mark.workers]

BANDS = set(Band.values)


@pytest.fixture
def smollm2(db):
    return services.probe_model_add(name="smollm2", backend="transformers", max_new_tokens=10, temperature=0.8)


@pytest.fixture
def two_tasks(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        math_task("easy", "What is 1 + 1?", "2"),
        math_task("hard", "What is 9876 * 5432?", "53646432"),
    )
    return arithmetic


@pytest.mark.django_db
def test_inline_probe_captures_tokens_and_calibrates(two_tasks, smollm2, alice):
    campaign = services.campaign_start(
        environment=two_tasks, probe_model=smollm2, created_by=alice, rollouts=3, round_size=3, seed=11, enqueue=False
    )
    services.campaign_run_inline(campaign=campaign)
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.DONE
    rollouts = list(Rollout.objects.filter(campaign=campaign).select_related("task_version"))
    assert len(rollouts) == 6
    assert len({rollout.seed for rollout in rollouts}) == 6  # no two rollouts share a seed

    backend = services.backend_for_probe_model(smollm2)
    for rollout in rollouts:
        prompt_ids = unpack_tokens(rollout.prompt_token_ids)
        completion_ids = unpack_tokens(rollout.completion_token_ids)
        logprobs = unpack_logprobs(rollout.logprobs)
        assert prompt_ids == backend.prompt_token_ids(messages=rollout.task_version.prompt)
        assert rollout.task_version.prompt[0]["content"] in backend._tokenizer.decode(prompt_ids)
        assert backend._tokenizer.decode(completion_ids, skip_special_tokens=True) == rollout.text
        assert 0 < len(completion_ids) <= 10 and len(logprobs) == len(completion_ids)
        assert all(value <= 0 for value in logprobs)
        assert rollout.outcome in (Outcome.PASS, Outcome.FAIL)
        assert (rollout.reward is not None) and rollout.finish_reason in ("stop", "length")

    for calibration in Calibration.objects.filter(probe_model=smollm2):
        assert calibration.attempts == 3 and calibration.band in BANDS
        assert calibration.interval_low <= calibration.pass_rate <= calibration.interval_high
        passes = Rollout.objects.filter(task_version=calibration.task_version, outcome=Outcome.PASS).count()
        assert calibration.successes == passes

    # Running a finished round again stores nothing new.
    version = rollouts[0].task_version
    assert services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=[version.pk], round_index=0) == 0
    assert Rollout.objects.filter(campaign=campaign).count() == 6


@pytest.mark.django_db
def test_same_seed_gives_the_same_rollout(two_tasks, smollm2, alice):
    texts = []
    for _ in range(2):
        campaign = services.campaign_start(
            environment=two_tasks,
            probe_model=smollm2,
            created_by=alice,
            rollouts=2,
            round_size=2,
            seed=5,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
        texts.append(
            [
                (r.seed, bytes(r.completion_token_ids))
                for r in campaign.rollouts.order_by("task_version", "sample_index")
            ]
        )
    assert texts[0] == texts[1]


@pytest.mark.django_db(transaction=True)
def test_round_trip_through_a_real_worker(two_tasks, smollm2, alice):
    flush_broker()
    campaign = services.campaign_start(
        environment=two_tasks, probe_model=smollm2, created_by=alice, rollouts=2, round_size=2, seed=3
    )
    with running_worker(queues="default,generate,verify", concurrency=1):
        wait_for(
            lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE,
            timeout=240,
            what="the worker to finish the campaign",
        )
    progress = selectors.campaign_progress(campaign=campaign)
    assert progress["stored"] == 4 and progress["unverified"] == 0
    assert progress["passed"] + progress["failed"] == 4
    assert Calibration.objects.filter(probe_model=smollm2, attempts=2).count() == 2


@pytest.mark.django_db
def test_loading_the_model_is_a_campaign_state_of_its_own_billed_to_no_rollout(
    two_tasks, smollm2, alice, client, monkeypatch
):
    """A worker that has not loaded the model yet loads it before the first sample: the campaign shows it
    as a state with its own seconds, and those seconds are in no rollout's device time (nor its cost).

    The real SmolLM2 is loaded, but the clock the worker reads jumps an hour while it loads, so a load
    billed to a rollout would show as an hour of device time whatever the machine's load."""
    from calibration.services import rounds
    from engine import backends

    backends.backends_clear()  # as a fresh worker: this process has no SmolLM2 loaded
    hour = 3600.0
    jumps = []
    real_create, real_clock = backends._create_backend, rounds.time.perf_counter

    def create_with_a_slow_load(options):
        jumps.append(hour)
        return real_create(options)

    monkeypatch.setattr(backends, "_create_backend", create_with_a_slow_load)
    clock = types.SimpleNamespace(**vars(rounds.time))
    clock.perf_counter = lambda: real_clock() + sum(jumps)
    monkeypatch.setattr(rounds, "time", clock)
    campaign = services.campaign_start(
        environment=two_tasks, probe_model=smollm2, created_by=alice, rollouts=1, round_size=1, seed=5, enqueue=False
    )
    client.force_login(alice)
    Campaign.objects.filter(pk=campaign.pk).update(model_loading_since=campaign.created_at)
    loading = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="campaign-model-loading"' in loading and "no rollout is sampled until it is loaded" in loading
    Campaign.objects.filter(pk=campaign.pk).update(model_loading_since=None)
    services.campaign_run_inline(campaign=campaign)
    campaign.refresh_from_db()
    assert jumps == [hour]  # the model was created once, for this campaign
    assert campaign.model_loading_since is not None and campaign.model_load_seconds >= hour
    rollouts = list(Rollout.objects.filter(campaign=campaign).order_by("pk"))
    assert len(rollouts) == 2 and all(0 < rollout.device_ms < hour * 1000 for rollout in rollouts), [
        rollout.device_ms for rollout in rollouts
    ]
    loaded = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="campaign-model-loaded"' in loaded and "not billed to rollouts" in loaded
