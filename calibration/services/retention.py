"""Retention: drop the bulky part of old rollouts, keep what counts and calibrations are made of."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from calibration.models import Campaign, Rollout

FINISHED = (Campaign.Status.DONE, Campaign.Status.CANCELLED)


def rollouts_prune(
    *,
    older_than: timedelta,
    keep_per_task: int = 2,
    campaign_id: int | None = None,
    dry_run: bool = False,
    batch_size: int = 5000,
) -> int:
    """Drop token ids, logprobs, text and episode of verified rollouts of finished campaigns created more
    than `older_than` ago, keeping the first `keep_per_task` samples of each task version in each
    campaign whole (examples for the trajectory viewer). Returns how many rollouts were (or, with
    `dry_run`, would be) pruned.

    The rows stay, with their verdict, reward, token counts, seed and cost, and `pruned_at` set: the
    calibrations, which are counted from verdicts, come out the same when recomputed, and a campaign
    that samples the task again adds to exact counts. Works in batches of `batch_size`, one
    transaction each, so a large prune does not hold long locks.
    """
    candidates = Rollout.objects.filter(
        created_at__lt=timezone.now() - older_than,
        campaign__status__in=FINISHED,
        outcome__isnull=False,
        pruned_at__isnull=True,
        sample_index__gte=keep_per_task,
    )
    if campaign_id is not None:
        candidates = candidates.filter(campaign_id=campaign_id)
    if dry_run:
        return candidates.count()
    pruned = 0
    while True:
        with transaction.atomic():
            ids = list(candidates.order_by("id").values_list("id", flat=True)[:batch_size])
            if not ids:
                return pruned
            pruned += Rollout.objects.filter(id__in=ids, pruned_at__isnull=True).update(
                prompt_token_ids=None,
                completion_token_ids=None,
                logprobs=None,
                text="",
                episode=None,
                pruned_at=timezone.now(),
            )
