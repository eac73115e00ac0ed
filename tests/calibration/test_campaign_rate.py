"""The campaign's rate and time left come from what was stored, and say unknown rather than guess.

Each test stores real rollouts (through a fake OpenAI-compatible server), then gives them chosen store
instants and generation times, and reads what the campaign page reads."""

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from calibration import selectors, services
from calibration.models import Campaign, CampaignItem, Outcome, Rollout
from calibration.selectors import pace_rule
from calibration.selectors.pace_rule import items_ahead
from calibration.services.policies import policy_for, sampling_policy, thresholds_for
from engine import stats
from tests.factories import import_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db


def _campaign(arithmetic, alice, base_url, tasks: int, **options) -> Campaign:
    import_tasks(
        arithmetic,
        alice,
        *[
            {"key": f"t{i}", "prompt": f"What is {i} + 42?", "answer": str(i + 42), "verifier": {"kind": "exact"}}
            for i in range(tasks)
        ],
    )
    model = services.probe_model_add(name="fake", backend="openai", base_url=base_url, model="fake-model")
    options = {"rollouts": 4, "round_size": 4, **options}
    return services.campaign_start(
        environment=arithmetic, probe_model=model, created_by=alice, enqueue=False, **options
    )


def _versions(campaign: Campaign) -> list[int]:
    return list(campaign.items.order_by("task_version_id").values_list("task_version_id", flat=True))


def _store(campaign, version_id: int, round_index: int, *, minutes_ago: float, device_seconds: float = 0.01):
    """One job's round, stored `minutes_ago` minutes ago, each rollout charged `device_seconds`."""
    services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=[version_id], round_index=round_index)
    start = round_index * campaign.round_size
    Rollout.objects.filter(
        campaign=campaign,
        task_version_id=version_id,
        sample_index__gte=start,
        sample_index__lt=start + campaign.round_size,
    ).update(created_at=timezone.now() - timedelta(minutes=minutes_ago), device_ms=1000 * device_seconds)


def test_the_first_gap_is_warm_up_so_three_stores_give_the_first_rate(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=10)
        versions = _versions(campaign)
        progress = selectors.campaign_progress(campaign=campaign)
        assert progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None
        # One job's rollouts share one instant: a burst of 4 says nothing about speed (it was "480 per minute").
        _store(campaign, versions[0], 0, minutes_ago=5.5)
        progress = selectors.campaign_progress(campaign=campaign)
        assert progress["stored"] == 4 and progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None
        # The gap after the campaign's first store holds its warm-up: still unknown.
        _store(campaign, versions[1], 0, minutes_ago=3.5)
        progress = selectors.campaign_progress(campaign=campaign)
        assert progress["stored"] == 8 and progress["rollouts_per_minute"] is None
        _store(campaign, versions[2], 0, minutes_ago=1.5)
        progress = selectors.campaign_progress(campaign=campaign)
    # 4 rollouts after the second store, over the 2 minutes from it to the third.
    assert progress["rollouts_per_minute"] == pytest.approx(2.0, rel=0.02)
    # 10 tasks × 4 rollouts, 12 stored: 28 left at two a minute; a fixed campaign's time left is no bound.
    assert progress["eta_seconds"] == pytest.approx(14 * 60, rel=0.02)
    assert progress["eta_is_bound"] is False


def test_jobs_that_store_together_are_one_burst_not_a_speed(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=6)
        versions = _versions(campaign)
        # Rounds of a minute each (15 s of device time per rollout); two workers finish a second apart.
        _store(campaign, versions[0], 0, minutes_ago=5.5, device_seconds=15)
        _store(campaign, versions[1], 0, minutes_ago=3.5, device_seconds=15)
        _store(campaign, versions[2], 0, minutes_ago=3.5 - 1 / 60, device_seconds=15)
        progress = selectors.campaign_progress(campaign=campaign)
        # The two stores a second apart are one burst after the warm-up one: no speed yet.
        assert progress["rollouts_per_minute"] is None and progress["rate_bursts"] == 1
        _store(campaign, versions[3], 0, minutes_ago=1.5, device_seconds=15)
        progress = selectors.campaign_progress(campaign=campaign)
    # 4 rollouts after the burst of two stores, over the time from its end (3 min 29 s ago) to 1 min 30 s ago.
    assert progress["rollouts_per_minute"] == pytest.approx(4 / (119 / 60), rel=0.02)


def test_a_stall_since_the_last_store_slows_the_rate(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=6)
        versions = _versions(campaign)
        for position, minutes_ago in enumerate((9, 8, 7, 6)):
            _store(campaign, versions[position], 0, minutes_ago=minutes_ago)
        progress = selectors.campaign_progress(campaign=campaign)
    # 8 rollouts after the store 8 minutes ago, stored a minute apart; nothing for 6 minutes since: the
    # 5 minutes beyond the usual gap count, 8 over 2 + 5 minutes (the stall grows while the test runs: 5%).
    assert progress["rollouts_per_minute"] == pytest.approx(8 / 7, rel=0.05)
    assert progress["eta_seconds"] == pytest.approx(8 / (8 / 7) * 60, rel=0.05)


def _three_first_rounds(arithmetic, alice, base_url, *, rollouts: int) -> tuple[Campaign, list[int]]:
    """An adaptive campaign of 4 tasks in rounds of 4 whose first three rounds were stored two minutes apart,
    the last 1.5 minutes ago (two rollouts a minute)."""
    campaign = _campaign(arithmetic, alice, base_url, tasks=4, policy="adaptive", rollouts=rollouts, round_size=4)
    versions = _versions(campaign)
    for position, minutes_ago in enumerate((5.5, 3.5, 1.5)):
        _store(campaign, versions[position], 0, minutes_ago=minutes_ago)
    return campaign, versions


def _outcomes(campaign, version_id: int, outcomes: str) -> None:
    """The verdicts of the version's stored rollouts, in sample order: "p" pass, "f" fail."""
    rollouts = Rollout.objects.filter(campaign=campaign, task_version_id=version_id).order_by("sample_index")
    for rollout, outcome in zip(rollouts, outcomes, strict=True):
        Rollout.objects.filter(pk=rollout.pk).update(outcome={"p": Outcome.PASS, "f": Outcome.FAIL}[outcome])


def _simulated_rollouts_left(campaign, *, passes: int, attempts: int, to_store: int = 0, runs: int = 4000) -> float:
    """Rollouts an open item at `passes` of `attempts`, with `to_store` rollouts of its round still to come,
    runs, by simulating the rule the rounds apply (stats.assess): a pass rate drawn from the item's posterior
    (Jeffreys prior), rounds drawn from it until the band is not undecided or the campaign's cap is reached."""
    rng = np.random.default_rng(7)
    thresholds = thresholds_for(campaign.environment)
    policy = sampling_policy(policy_for(campaign), attempts=attempts)
    total = 0
    for _ in range(runs):
        rate = rng.beta(0.5 + passes, 0.5 + attempts - passes)
        s, n = passes + int(rng.binomial(to_store, rate)), attempts + to_store
        total += to_store
        while n < campaign.max_rollouts:
            if stats.assess(successes=s, attempts=n, thresholds=thresholds, policy=policy).band != "undecided":
                break
            s += int(rng.binomial(campaign.round_size, rate))
            n += campaign.round_size
            total += campaign.round_size
    return total / runs


def test_adaptive_time_left_follows_the_stopping_rule_from_the_first_figure(client, arithmetic, alice):
    client.force_login(alice)
    with serve_openai() as base_url:
        campaign, versions = _three_first_rounds(arithmetic, alice, base_url, rollouts=16)
        # Three first rounds stored and verified, no item decided yet: every pass, half, none.
        for version, outcomes in zip(versions, ("pppp", "ppff", "ffff"), strict=False):
            _outcomes(campaign, version, outcomes)
        ahead = items_ahead(campaign=campaign)
        progress = selectors.campaign_progress(campaign=campaign)
        page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    every_pass, half, none, unstarted = (
        _simulated_rollouts_left(campaign, passes=4, attempts=4),
        _simulated_rollouts_left(campaign, passes=2, attempts=4),
        _simulated_rollouts_left(campaign, passes=0, attempts=4),
        _simulated_rollouts_left(campaign, passes=0, attempts=0, to_store=4),
    )
    expected = every_pass + half + none + unstarted
    assert ahead is not None and ahead.rollouts == pytest.approx(expected, rel=0.05)
    # An item that passed every time is decided sooner than one at half, which runs more rounds.
    assert every_pass < half
    # No item decided yet, and the time left is an estimate from the first figure, not "at most" the cap.
    assert progress["rollouts_per_minute"] == pytest.approx(2.0, rel=0.02)
    assert progress["eta_is_bound"] is False
    assert progress["eta_seconds"] == pytest.approx(ahead.rollouts / 2 * 60, rel=0.02)
    assert "campaign-eta-bound" not in page


def test_many_item_states_fall_back_to_the_shares_of_decided_items(client, arithmetic, alice, monkeypatch):
    """Past MAX_STATES distinct item states the rule is not run per page view: time left counts the share of
    decided items that went on, an upper bound ("at most") until an item is decided at a round ahead."""
    monkeypatch.setattr(pace_rule, "MAX_STATES", 0)
    client.force_login(alice)
    with serve_openai() as base_url:
        campaign, versions = _three_first_rounds(arithmetic, alice, base_url, rollouts=8)
        progress = selectors.campaign_progress(campaign=campaign)
        # Two a minute; no item decided at the first round yet: every open item counted to the cap of 8
        # (three with round two to go, one with both), 20 rollouts, at most 10 minutes.
        assert progress["rollouts_per_minute"] == pytest.approx(2.0, rel=0.02)
        assert progress["eta_is_bound"] is True
        assert progress["eta_seconds"] == pytest.approx(10 * 60, rel=0.02)
        page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
        assert "2.0 rollouts per minute" in page and 'id="campaign-eta-bound">at most' in page
        # The first round decides: one task stops (in band), one goes on to round two.
        CampaignItem.objects.filter(campaign=campaign, task_version_id=versions[0]).update(done=True)
        CampaignItem.objects.filter(campaign=campaign, task_version_id=versions[1]).update(round=1)
        progress = selectors.campaign_progress(campaign=campaign)
    # Half go on: the one in round two has 4 left, the stored one 0 + 4/2, the unstarted one 4 + 4/2.
    assert progress["eta_is_bound"] is False
    assert progress["eta_seconds"] == pytest.approx(12 / 2 * 60, rel=0.02)
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "campaign-eta-bound" not in page and "about 6" in page


def test_adaptive_rounds_no_task_can_reach_leave_no_bound(arithmetic, alice, monkeypatch):
    monkeypatch.setattr(pace_rule, "MAX_STATES", 0)  # the shares of decided items (the test above)
    with serve_openai() as base_url:
        campaign, versions = _three_first_rounds(arithmetic, alice, base_url, rollouts=12)
        # Every task decided at the first round stopped: nobody reaches rounds two and three, whatever
        # would be decided there, so the last task's time left is its first round, not a bound.
        CampaignItem.objects.filter(campaign=campaign, task_version_id__in=versions[:3]).update(done=True)
        progress = selectors.campaign_progress(campaign=campaign)
    assert progress["eta_is_bound"] is False
    assert progress["eta_seconds"] == pytest.approx(4 / 2 * 60, rel=0.02)


def test_the_last_task_waits_for_its_rounds_one_after_another(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=5, rollouts=8, round_size=4)
        versions = _versions(campaign)
        # Rounds of 200 s (50 s of device time per rollout) finishing two minutes apart: workers in parallel.
        for position, minutes_ago in enumerate((7, 5, 3, 1)):
            _store(campaign, versions[position], 0, minutes_ago=minutes_ago, device_seconds=50)
        CampaignItem.objects.filter(campaign=campaign, task_version_id__in=versions[:4]).update(done=True)
        progress = selectors.campaign_progress(campaign=campaign)
    # Two a minute would do the last task's 8 rollouts in 4 minutes, but its two rounds take 200 s each.
    assert progress["rollouts_per_minute"] == pytest.approx(2.0, rel=0.02)
    assert progress["eta_seconds"] == pytest.approx(400, rel=0.02)


def test_stores_within_one_round_are_not_yet_a_pace(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=6, rollouts=8, round_size=4)
        versions = _versions(campaign)
        # Rounds of at least 2 minutes (30 s of device time per rollout); after the warm-up store, three
        # more within a minute and a half: less than one round, no pace yet.
        for position, minutes_ago in enumerate((9.5, 8, 7.25, 6.5)):
            _store(campaign, versions[position], 0, minutes_ago=minutes_ago, device_seconds=30)
        assert selectors.campaign_progress(campaign=campaign)["rollouts_per_minute"] is None
        # A task's second round 4 minutes after its first: a round takes 4 minutes (generation, verification,
        # the queue), and 3 min 15 s from the first burst (the stores 45 s apart are one) is still less.
        CampaignItem.objects.filter(campaign=campaign, task_version_id__in=versions[1:3]).update(round=1)
        _store(campaign, versions[1], 1, minutes_ago=4, device_seconds=30)
        assert selectors.campaign_progress(campaign=campaign)["rollouts_per_minute"] is None
        _store(campaign, versions[2], 1, minutes_ago=1.5, device_seconds=30)
        progress = selectors.campaign_progress(campaign=campaign)
    # 12 rollouts after the burst that ended 7 min 15 s ago, over the 5 min 45 s to the last store.
    assert progress["rollouts_per_minute"] == pytest.approx(12 / 5.75, rel=0.02)


def test_stores_older_than_the_window_are_unknown_not_zero(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=3)
        versions = _versions(campaign)
        _store(campaign, versions[0], 0, minutes_ago=30)
        _store(campaign, versions[1], 0, minutes_ago=25)
        _store(campaign, versions[2], 0, minutes_ago=20)
        progress = selectors.campaign_progress(campaign=campaign)
    assert progress["stored"] == 12
    assert progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None


def test_a_campaign_not_running_has_no_rate(arithmetic, alice):
    with serve_openai() as base_url:
        campaign = _campaign(arithmetic, alice, base_url, tasks=4)
        versions = _versions(campaign)
        for position, minutes_ago in enumerate((5.5, 3.5, 1.5)):
            _store(campaign, versions[position], 0, minutes_ago=minutes_ago)
        services.campaign_set_status(campaign=campaign, status=Campaign.Status.PAUSED)
        progress = selectors.campaign_progress(campaign=Campaign.objects.get(pk=campaign.pk))
    assert progress["stored"] == 12 and progress["rollouts_per_minute"] is None and progress["eta_seconds"] is None


def test_the_rule_runs_once_per_change_of_the_campaign_not_per_page_view(arithmetic, alice, monkeypatch):
    runs = []
    expected_ahead = pace_rule.expected_ahead
    monkeypatch.setattr(pace_rule, "expected_ahead", lambda **state: runs.append(state) or expected_ahead(**state))
    with serve_openai() as base_url:
        campaign, versions = _three_first_rounds(arithmetic, alice, base_url, rollouts=16)
        for version, outcomes in zip(versions, ("pppp", "ppff", "ffff"), strict=False):
            _outcomes(campaign, version, outcomes)
        first = selectors.campaign_progress(campaign=campaign)
        ran = len(runs)
        assert (
            ran
            and [selectors.campaign_progress(campaign=campaign)["eta_seconds"] for _ in range(3)]
            == [first["eta_seconds"]] * 3
        )
        assert len(runs) == ran  # the same figures, from the cache
        # A verdict changes (the task at half now passed three times): the rule runs again, on the new evidence.
        _outcomes(campaign, versions[1], "pppf")
        again = pace_rule.items_ahead(campaign=campaign)
    assert len(runs) > ran and again is not None
    monkeypatch.setattr(pace_rule, "expected_ahead", expected_ahead)
    assert again.rollouts == pace_rule._items_ahead(campaign=campaign).rollouts
