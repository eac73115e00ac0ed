"""Leases on campaign rounds: how beat tells a stalled round from a slow or waiting one.

A worker that takes a round holds a lease on its items, renewed by a heartbeat thread while the job runs (the
generate worker's main thread is blocked in the model call for as long as a generation takes). Beat queues a
round again only when its lease ran out, that is when the worker stopped; a round still queued, with no lease,
is queued again only when nothing happened anywhere for the stall time (no live lease, nothing queued or handed
on: no worker is at work, so its message is gone).
Each re-queue is a compare-and-swap on the item, so two reconciles never queue one round twice.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from typing import Callable, Iterator

from django.conf import settings
from django.db import connections
from django.db.models import Q
from django.utils import timezone

from calibration.models import CampaignItem, VariantProbe

logger = logging.getLogger(__name__)


def lease_seconds() -> float:
    return float(settings.PASSBAND_ROUND_LEASE_S)


def _held_items(*, campaign_id: int, task_version_ids: list[int], round_index: int):
    # The round, or the next one once verify moved the items forward within the job.
    return CampaignItem.objects.filter(
        campaign_id=campaign_id,
        task_version_id__in=task_version_ids,
        done=False,
        round__in=[round_index, round_index + 1],
    )


def round_lease_renew(*, campaign_id: int, task_version_ids: list[int], round_index: int) -> int:
    """Hold (or keep holding) the round's open items for another lease period; returns items held."""
    return _held_items(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())
    )


def round_lease_release(*, campaign_id: int, task_version_ids: list[int], round_index: int) -> int:
    """The job ended: its open items wait for their next job (queued now, no lease); returns items released."""
    return _held_items(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index).update(
        lease_expires_at=None, queued_at=timezone.now()
    )


@contextmanager
def renewed_while(renew: Callable[[], object], *, name: str) -> Iterator[None]:
    """Call `renew` every third of the lease in a heartbeat thread while the block runs (the worker's main thread
    may be blocked in a model call for as long as a generation takes). A failed renewal is logged as `name` and
    tried again at the next beat; the thread's own database connections are closed when it ends."""
    stop = threading.Event()

    def heartbeat() -> None:
        try:
            while not stop.wait(lease_seconds() / 3):
                try:
                    renew()
                except Exception:  # a database away for a moment: the next beat tries again
                    logger.exception("%s: the lease was not renewed", name)
        finally:
            connections.close_all()

    thread = threading.Thread(target=heartbeat, name=f"lease {name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextmanager
def round_leased(*, campaign_id: int, task_version_ids: list[int], round_index: int) -> Iterator[None]:
    """Hold the round's lease while the block runs, renewed by a heartbeat thread every third of the lease."""
    renew = partial(round_lease_renew, campaign_id=campaign_id, task_version_ids=list(task_version_ids),
                    round_index=round_index)  # fmt: skip
    renew()
    try:
        with renewed_while(renew, name=f"campaign {campaign_id} round {round_index}"):
            yield
    finally:
        round_lease_release(**renew.keywords)


def stalled_condition(*, stalled_for_seconds: float) -> Q:
    """Open, queued items that stalled: a lease that ran out; or, when nothing happened anywhere for
    `stalled_for_seconds` (no live lease, no item queued or handed on since), a queued item with no lease
    (its message was lost)."""
    now = timezone.now()
    quiet_since = now - timedelta(seconds=stalled_for_seconds)
    condition = Q(lease_expires_at__lt=now)
    if nothing_at_work(quiet_since=quiet_since):
        condition |= Q(lease_expires_at__isnull=True, queued_at__lt=quiet_since)
    return Q(done=False, queued_at__isnull=False) & condition


def nothing_at_work(*, quiet_since) -> bool:
    """Whether no worker is at work: no live lease on an open round or a running impossible-variant probe, and
    nothing of theirs queued or handed on since `quiet_since`. A job queued before then and still without a
    lease is then not waiting behind others: its message was lost."""
    now = timezone.now()
    live = Q(lease_expires_at__gte=now) | Q(queued_at__gte=quiet_since)
    return not (
        CampaignItem.objects.filter(done=False).filter(live).exists()
        or VariantProbe.objects.filter(status=VariantProbe.Status.RUNNING).filter(live).exists()
    )


def stalled_items_claim(*, campaign_id: int, stalled_for_seconds: float) -> list[tuple]:
    """The campaign's stalled items, each claimed for one re-queue (compare-and-swap: lease cleared, queued
    now); returns (version id, round, verifier, tools) of those this call claimed."""
    condition = stalled_condition(stalled_for_seconds=stalled_for_seconds)
    candidates = list(
        CampaignItem.objects.filter(condition, campaign_id=campaign_id)
        .order_by("round", "task_version_id")
        .values_list("pk", "task_version_id", "round", "task_version__verifier", "task_version__tools")
    )
    claimed = []
    for pk, *row in candidates:
        if CampaignItem.objects.filter(condition, pk=pk).update(lease_expires_at=None, queued_at=timezone.now()):
            claimed.append(tuple(row))
    return claimed
