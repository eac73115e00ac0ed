"""A running campaign's pace: rollouts per minute measured from what was stored, and the time left.

Every figure comes from rollouts actually stored; where the stored rows cannot tell, the figure is
None ("unknown") rather than a guess. docs/calibration.md says how the page words each case.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Sum
from django.utils import timezone

from calibration.models import Campaign, CampaignItem, Rollout
from calibration.selectors.pace_rule import items_ahead

# Stores older than this do not count: the rate is the campaign's pace now, not its average.
RATE_WINDOW = timedelta(minutes=10)
# At most this many (store, task) rows, the latest: a fast campaign's ten minutes are plenty of bursts.
WINDOW_ROWS = 2000
# Stores closer together than this share of one round's seconds are one burst: concurrent jobs that
# finish together, whose gaps of milliseconds say nothing about speed.
BURST_SHARE = 0.25


@dataclass(frozen=True)
class Pace:
    """What the campaign page says about speed. `rollouts_per_minute` and `eta_seconds` are None when
    unknown; `eta_is_bound` means the time left is an upper bound (an adaptive campaign with too many item
    states to run the stopping rule per item, and no item yet decided at a round still ahead, so every open
    item is counted to the cap); `bursts` is how many
    stores, merged into bursts, the rate was measured over."""

    rollouts_per_minute: float | None = None
    eta_seconds: float | None = None
    eta_is_bound: bool = False
    bursts: int = 0


def campaign_pace(*, campaign: Campaign) -> Pace:
    """The rate and time left of a running campaign (anything else: unknown).

    The rate counts the rollouts stored after the window's first burst over the time from the end of
    that burst to the end of the last one (the campaign's own first burst never anchors it: the gap
    after it holds the warm-up); a pause longer than the bursts' usual gap since the last one stretches
    that time (a stall slows the rate). Under two bursts, or over less than one round: unknown. The
    time left is the open items' expected rollouts (rollouts_left) at that rate, but never less than the
    rounds the slowest open item is expected to run one after another (the tail, where few tasks keep the workers
    busy). One round's seconds (_round_seconds) also set how close stores must be to be one burst."""
    if campaign.status != Campaign.Status.RUNNING:
        return Pace()
    rate, round_seconds, bursts = measured_rate(campaign=campaign)
    if rate is None:
        return Pace(bursts=bursts)
    left = rollouts_left(campaign=campaign)
    eta = max(60 * left.rollouts / rate, left.rounds * round_seconds) if left.rollouts else 0.0
    return Pace(rollouts_per_minute=rate, eta_seconds=eta, eta_is_bound=left.is_bound, bursts=bursts)


def measured_rate(*, campaign: Campaign) -> tuple[float | None, float, int]:
    """The campaign's rollouts per minute (None: unknown), one round's seconds, and the bursts the rate was
    measured over (campaign_pace)."""
    now = timezone.now()
    rows = list(
        Rollout.objects.filter(campaign=campaign, created_at__gte=now - RATE_WINDOW)
        .values("created_at", "task_version_id")
        .annotate(count=Count("id"), device_ms=Sum("device_ms"))
        .order_by("-created_at")[:WINDOW_ROWS]
    )[::-1]
    stores: dict[datetime, int] = {}
    for row in rows:
        stores[row["created_at"]] = stores.get(row["created_at"], 0) + row["count"]
    round_seconds = _round_seconds(rows)
    min_gap = BURST_SHARE * round_seconds
    bursts = _bursts(list(stores.items()), min_gap_seconds=min_gap)
    last_store = bursts[-1][1] if bursts else now
    if bursts and (now - bursts[-1][0]).total_seconds() < min_gap:
        # Still open: the other jobs of its round may store into it yet, and half a burst over a whole gap
        # would halve the rate. It counts once closed.
        bursts = bursts[:-1]
    first_ever = Rollout.objects.filter(campaign=campaign).aggregate(first=Min("created_at"))["first"]
    if rows and rows[0]["created_at"] == first_ever:
        # The campaign's first gap holds its warm-up (connections, verifier processes, caches), not its pace.
        bursts = bursts[1:]
    rate = _rate([(end, rollouts) for _, end, rollouts in bursts], since_store=(now - last_store).total_seconds(),
                 min_span_seconds=round_seconds)  # fmt: skip
    return rate, round_seconds, len(bursts)


def _round_seconds(rows: list[dict]) -> float:
    """One job's round, from stores (rows of created_at, task_version_id, count, device_ms; oldest first):
    the longer of the median store's generation time (its rollouts' device shares add up to it) and the
    median time between two rounds of one task (generation, verification and the queue); 0 for none."""
    generation: dict[datetime, float] = {}
    last_of: dict[int, datetime] = {}
    between: list[float] = []
    for row in rows:
        generation[row["created_at"]] = generation.get(row["created_at"], 0.0) + (row["device_ms"] or 0) / 1000
        if row["task_version_id"] in last_of:
            between.append((row["created_at"] - last_of[row["task_version_id"]]).total_seconds())
        last_of[row["task_version_id"]] = row["created_at"]
    if not generation:
        return 0.0
    return max(statistics.median(generation.values()), statistics.median(between) if between else 0.0)


def _bursts(stores: list[tuple[datetime, int]], *, min_gap_seconds: float) -> list[tuple[datetime, datetime, int]]:
    """Stores (instant, rollouts), oldest first, merged into bursts (first instant, end instant, rollouts): a
    store within `min_gap_seconds` of its burst's first store joins it."""
    bursts: list[tuple[datetime, datetime, int]] = []
    for instant, count in stores:
        if bursts and (instant - bursts[-1][0]).total_seconds() < min_gap_seconds:
            first, _, rollouts = bursts[-1]
            bursts[-1] = (first, instant, rollouts + count)
        else:
            bursts.append((instant, instant, count))
    return bursts


def _rate(bursts: list[tuple[datetime, int]], *, since_store: float, min_span_seconds: float) -> float | None:
    """Rollouts per minute after the first burst, or None under two bursts or a span under
    `min_span_seconds` (less than one round: concurrent jobs' stores, not yet a pace). `since_store`: the
    seconds since the last store (an open burst's too), beyond the bursts' usual gap a stall."""
    if len(bursts) < 2:
        return None
    span = (bursts[-1][0] - bursts[0][0]).total_seconds()
    if span <= 0 or span < min_span_seconds:
        return None
    usual_gap = span / (len(bursts) - 1)
    stalled = max(since_store - usual_gap, 0.0)
    return sum(rollouts for _, rollouts in bursts[1:]) / ((span + stalled) / 60)


@dataclass(frozen=True)
class RolloutsLeft:
    """The open items' expected rollouts to go, the most rounds one of them still runs, and whether
    that is only an upper bound (`is_bound`)."""

    rollouts: float
    rounds: float
    is_bound: bool


def rollouts_left(*, campaign: Campaign) -> RolloutsLeft:
    """Rollouts the open items of `campaign` are expected to still store. Adaptive: from the stopping rule
    and each item's own evidence (pace_rule.items_ahead) where the items' states are few enough, else by
    the shares of decided items (rollouts_left_by_shares)."""
    ahead = items_ahead(campaign=campaign)
    if ahead is None:
        return rollouts_left_by_shares(campaign=campaign)
    return RolloutsLeft(rollouts=ahead.rollouts, rounds=max(ahead.rounds, default=0.0), is_bound=False)


def rollouts_left_by_shares(*, campaign: Campaign) -> RolloutsLeft:
    """Rollouts the open items of `campaign` are expected to still store (three small aggregates, whatever
    the campaign's size).

    Fixed: each open item to the cap. Adaptive: each round ahead is reached with the share of this
    campaign's items that went on after it (items decided at that round or later); where no item has
    been decided at a round an open item could still reach, every open item is counted through it, and
    the result is an upper bound. An item moves to its next round only once its round is stored, so the
    open items' current rounds hold what they have stored."""
    counts = list(
        CampaignItem.objects.filter(campaign=campaign).values_list("round", "done").annotate(n=Count("id")).order_by()
    )
    open_rounds = {round_index: n for round_index, done, n in counts if not done}
    if not open_rounds:
        return RolloutsLeft(rollouts=0, rounds=0, is_bound=False)
    open_versions = CampaignItem.objects.filter(campaign=campaign, done=False).values("task_version")
    stored_open = Rollout.objects.filter(campaign=campaign, task_version__in=open_versions).count()
    last_round = math.ceil(campaign.max_rollouts / campaign.round_size) - 1
    go_on = _going_on(campaign=campaign, counts=counts, last_round=last_round)

    def end(round_index: int) -> int:
        return min((round_index + 1) * campaign.round_size, campaign.max_rollouts)

    # The open items' current rounds, less what they stored; then each round ahead as it is reached.
    rollouts = float(max(sum(n * end(at) for at, n in open_rounds.items()) - stored_open, 0))
    rounds, is_bound = 0.0, False
    for round_index, n in open_rounds.items():
        reach, expected_rounds = 1.0, 1.0
        for ahead in range(round_index + 1, last_round + 1):
            share = go_on.get(ahead - 1)
            is_bound = is_bound or (share is None and reach > 0)
            reach *= 1.0 if share is None else share
            rollouts += n * reach * (end(ahead) - ahead * campaign.round_size)
            expected_rounds += reach
        rounds = max(rounds, expected_rounds)
    return RolloutsLeft(rollouts=rollouts, rounds=rounds, is_bound=is_bound)


def _going_on(*, campaign: Campaign, counts: list[tuple[int, bool, int]], last_round: int) -> dict[int, float]:
    """Per round, the share of the items decided there that went on to the next round, from (round, done,
    items) counts: every item for a fixed campaign; for an adaptive one, only rounds at which some item
    was decided."""
    if campaign.policy != Campaign.Policy.ADAPTIVE:
        return dict.fromkeys(range(last_round), 1.0)
    shares = {}
    for round_index in range(last_round):
        went_on = sum(n for at, _, n in counts if at > round_index)
        stopped = sum(n for at, done, n in counts if done and at == round_index)
        if went_on + stopped:
            shares[round_index] = went_on / (went_on + stopped)
    return shares
