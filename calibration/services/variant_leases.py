"""Leases on impossible-variant probes: a lost or killed probe job is queued again, never left `running`.

As for campaign rounds (calibration/services/leases.py): the worker that runs a probe holds a lease on it, taken
with a compare-and-swap (so two messages for one probe never run at once) and renewed by a heartbeat thread while
the job runs. Beat's reconcile queues a running probe again when its lease ran out (its worker died), or, when
nothing happened anywhere for the stall time (no live lease, nothing queued since), when it was queued and no
worker ever took it (its message was lost). Each re-queue is a compare-and-swap too. A re-run finds what the lost
job stored (variants and samples are unique per probe) and asks only for the rest.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from datetime import timedelta
from typing import Iterator

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from calibration.models import VariantProbe
from calibration.services.leases import lease_seconds, nothing_at_work, renewed_while

logger = logging.getLogger(__name__)


def variant_probe_queue(*, probe_id: int) -> None:
    """Send the probe's job to the workers once the transaction commits (now, outside one), noting when."""
    VariantProbe.objects.filter(pk=probe_id).update(queued_at=timezone.now())
    transaction.on_commit(lambda: _send(probe_id))


def _send(probe_id: int) -> None:
    try:
        current_app.tasks["calibration.tasks.generate_impossible_variants"].delay(probe_id)
    except Exception:
        logger.exception("could not queue impossible-variant probe %s", probe_id)
        VariantProbe.objects.filter(pk=probe_id).update(error="the broker refused the job: beat queues it again")


def _renew(probe_id: int) -> int:
    return VariantProbe.objects.filter(pk=probe_id, status=VariantProbe.Status.RUNNING).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())
    )


@contextmanager
def variant_probe_leased(*, probe_id: int) -> Iterator[bool]:
    """Hold the probe's lease while the block runs (True), renewed every third of the lease; False, and no lease,
    when another worker holds a live one or the probe is no longer running (the block should do nothing)."""
    now = timezone.now()
    taken = (
        VariantProbe.objects.filter(pk=probe_id, status=VariantProbe.Status.RUNNING)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .update(lease_expires_at=now + timedelta(seconds=lease_seconds()))
    )
    if not taken:
        yield False
        return
    try:
        with renewed_while(lambda: _renew(probe_id), name=f"impossible-variant probe {probe_id}"):
            yield True
    finally:
        VariantProbe.objects.filter(pk=probe_id).update(lease_expires_at=None)


def stalled_probes_condition(*, stalled_for_seconds: float) -> Q:
    """Running probes that stalled: a lease that ran out; or, when nothing is at work anywhere for
    `stalled_for_seconds`, a probe queued before then that no worker holds (its message was lost)."""
    now = timezone.now()
    quiet_since = now - timedelta(seconds=stalled_for_seconds)
    condition = Q(lease_expires_at__lt=now)
    if nothing_at_work(quiet_since=quiet_since):
        condition |= Q(lease_expires_at__isnull=True, queued_at__lt=quiet_since)
    return Q(status=VariantProbe.Status.RUNNING, queued_at__isnull=False) & condition


def variant_probes_reconcile(*, stalled_for_seconds: float | None = None) -> int:
    """Queue again every stalled probe (`stalled_probes_condition`, default stall settings.PASSBAND_STALLED_AFTER),
    each claimed by a compare-and-swap so two reconciles never queue one twice; run by beat. Returns how many."""
    if stalled_for_seconds is None:
        stalled_for_seconds = settings.PASSBAND_STALLED_AFTER
    condition = stalled_probes_condition(stalled_for_seconds=stalled_for_seconds)
    queued = 0
    for probe_id in VariantProbe.objects.filter(condition).order_by("pk").values_list("pk", flat=True):
        if VariantProbe.objects.filter(condition, pk=probe_id).update(lease_expires_at=None, queued_at=timezone.now()):
            logger.warning(
                "impossible-variant probe %s stalled (its job was lost or its worker died): queued again", probe_id
            )
            transaction.on_commit(lambda probe_id=probe_id: _send(probe_id))
            queued += 1
    return queued
