"""What an adaptive campaign's open items are still expected to run, from the stopping rule itself.

An open item has passes s in n attempts so far (every rollout of its version by the campaign's probe model,
as the rule counts them) and a round in progress. Each round ahead is reached where the rule, at the end of
the round before, still says "continue" and the attempts are under the rule's cap; how likely that is
follows from the item's own evidence: the pass counts of the rounds ahead are drawn from the posterior
predictive (beta-binomial, Jeffreys prior) and passed through the rule at each round's end. So an item at 0
of 8 that the rule will call too hard in one more round is expected to run one round, one at 4 of 8 near the
middle of the band several, from the first rollouts on, without waiting for other items to be decided. (An
environment's learned stopping table, where one applies, decides a little differently: the estimate follows
the calibrated rule.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy  # scipy.stats loads on first use: it costs most of a process's start
from django.core.cache import cache
from django.db.models import Count, Q, Sum

from calibration.models import Campaign, CampaignItem, Outcome, Rollout
from calibration.services.policies import policy_for, sampling_policy, thresholds_for
from engine import stats

# More distinct item states than this and the caller falls back to the shares of decided items: a page
# view must stay cheap (a state costs about 10 ms at a cap of 256 in rounds of 8, 1 ms at 16 in rounds of 4).
MAX_STATES = 50
# A campaign's figures are kept this long (a changed campaign has a new key; old ones expire).
CACHE_SECONDS = 600
TOO_MANY_STATES = "too many states"


@dataclass(frozen=True)
class ItemsAhead:
    """Expected rollouts the open items still store, and each open item's expected rounds left (the one in
    progress counted as one)."""

    rollouts: float
    rounds: list[float]


def items_ahead(*, campaign: Campaign) -> ItemsAhead | None:
    """The open items' expected rollouts and rounds left under the campaign's stopping rule; None for a
    campaign that is not adaptive, or with more distinct item states than MAX_STATES.

    Kept in Django's cache per campaign and what it has stored, scored and decided (_cache_key): the rule
    runs once per change, not once per page view (up to half a second at a cap of 256 with 50 states)."""
    if campaign.policy != Campaign.Policy.ADAPTIVE:
        return None
    key = _cache_key(campaign)
    hit = cache.get(key)
    if hit is not None:
        return None if hit == TOO_MANY_STATES else ItemsAhead(rollouts=hit[0], rounds=list(hit[1]))
    ahead = _items_ahead(campaign=campaign)
    cache.set(key, TOO_MANY_STATES if ahead is None else (ahead.rollouts, ahead.rounds), CACHE_SECONDS)
    return ahead


def _cache_key(campaign: Campaign) -> str:
    """What items_ahead depends on that changes while a campaign runs: its rollouts stored, scored and passed,
    its items decided and their rounds (the seed and start tell apart campaigns that reuse a deleted one's id).
    Another campaign's rollouts of the same versions count at this one's next store."""
    rollouts = Rollout.objects.filter(campaign=campaign).aggregate(
        stored=Count("id"),
        scored=Count("id", filter=Q(outcome__isnull=False)),
        passed=Count("id", filter=Q(outcome=Outcome.PASS)),
    )
    items = CampaignItem.objects.filter(campaign=campaign).aggregate(
        done=Count("id", filter=Q(done=True)), rounds=Sum("round")
    )
    return (
        f"passband:pace-rule:{campaign.pk}:{campaign.seed}:{campaign.created_at.timestamp()}:{MAX_STATES}:"
        f"{rollouts['stored']}:{rollouts['scored']}:{rollouts['passed']}:{items['done']}:{items['rounds']}"
    )


def _items_ahead(*, campaign: Campaign) -> ItemsAhead | None:
    """items_ahead, computed."""
    open_items = list(
        CampaignItem.objects.filter(campaign=campaign, done=False).values_list("task_version_id", "round")
    )
    if not open_items:
        return ItemsAhead(rollouts=0.0, rounds=[])
    evidence = rule_evidence(
        probe_model_id=campaign.probe_model_id, campaign_id=campaign.pk, versions=[version for version, _ in open_items]
    )
    states: dict[tuple[int, int, int, int], tuple[float, float]] = {}
    rollouts, rounds = 0.0, []
    size, cap = campaign.round_size, campaign.max_rollouts
    for version, round_index in open_items:
        passes, attempts, stored = evidence.get(version, (0, 0, 0))
        in_round = max(min((round_index + 1) * size, cap) - stored, 0)  # still to store in the round in progress
        state = (passes, attempts, in_round, round_index)
        if state not in states:
            if len(states) >= MAX_STATES:
                return None
            states[state] = expected_ahead(campaign=campaign, passes=passes, attempts=attempts, in_round=in_round,
                                           round_index=round_index)  # fmt: skip
        ahead_rollouts, ahead_rounds = states[state]
        rollouts += in_round + ahead_rollouts
        rounds.append(1.0 + ahead_rounds)
    return ItemsAhead(rollouts=rollouts, rounds=rounds)


def rule_evidence(
    *, probe_model_id: int, campaign_id: int | None, versions: list[int]
) -> dict[int, tuple[int, int, int]]:
    """Per version (those with rollouts): passes and attempts by the probe model (every campaign, as the rule
    counts them), and the rollouts campaign `campaign_id` stored (0 without one)."""
    rows = (
        Rollout.objects.filter(task_version_id__in=versions, probe_model_id=probe_model_id)
        .values("task_version")
        .annotate(
            passes=Count("id", filter=Q(outcome=Outcome.PASS)),
            attempts=Count("id", filter=Q(outcome__in=(Outcome.PASS, Outcome.FAIL))),
            stored=Count("id", filter=Q(campaign_id=campaign_id)),
        )
        .order_by()
    )
    return {row["task_version"]: (row["passes"], row["attempts"], row["stored"]) for row in rows}


def expected_ahead(
    *,
    campaign: Campaign,
    passes: int,
    attempts: int,
    in_round: int,
    round_index: int,
    prior: stats.Beta = stats.JEFFREYS_PRIOR,
) -> tuple[float, float]:
    """(expected rollouts, expected rounds) after the round in progress, for an item at `passes` of `attempts`
    with `in_round` rollouts of its round still to come. The rollouts still to come count as attempts (their
    errors, which are not, are rare); their passes are drawn from the posterior predictive under `prior`.
    `campaign` may be unsaved: only its environment and policy are read."""
    size, cap = campaign.round_size, campaign.max_rollouts
    last_round = math.ceil(cap / size) - 1
    if round_index >= last_round:
        return 0.0, 0.0
    thresholds = thresholds_for(campaign.environment)
    policy = sampling_policy(policy_for(campaign), attempts=attempts)
    alive = np.zeros(1)
    alive[0] = 1.0  # the distribution of passes gained since `attempts`, over the items still sampling
    at, rollouts, rounds = attempts, 0.0, 0.0
    step = in_round
    for ahead in range(round_index + 1, last_round + 1):
        alive = _advance(alive, passes=passes, attempts=attempts, gained=at - attempts, new=step, prior=prior)
        at += step
        codes = stats.decision_codes(
            successes=passes + np.arange(alive.size), attempts=at, thresholds=thresholds, policy=policy
        )
        alive = np.where(codes == stats.CONTINUE, alive, 0.0)
        reach = float(alive.sum())
        if reach < 1e-4 or at >= policy.cap:  # the rule's cap counts every attempt, this campaign's or not
            break
        step = min((ahead + 1) * size, cap) - ahead * size
        rollouts += reach * step
        rounds += reach
    return rollouts, rounds


def _advance(alive: np.ndarray, *, passes: int, attempts: int, gained: int, new: int, prior: stats.Beta) -> np.ndarray:
    """`alive` (mass per passes gained in the `gained` attempts since `passes` of `attempts`) after `new` more
    attempts, whose passes each state draws from its posterior predictive under `prior`."""
    if new <= 0:
        return alive
    so_far = passes + np.arange(alive.size)
    tried = attempts + gained
    alpha = prior.alpha + so_far
    beta = prior.beta + tried - so_far
    pmf = scipy.stats.betabinom.pmf(np.arange(new + 1)[:, None], new, alpha[None, :], beta[None, :])
    moved = np.zeros(alive.size + new)
    for k in range(new + 1):
        moved[k : k + alive.size] += alive * pmf[k]
    return moved
