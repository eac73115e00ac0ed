"""Reads for review: each reviewer's progress. The review queue joins calibrations, so it lives in
calibration.selectors; what a user may see is curation.policy's."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from review.models import Review


def reviewer_progress(*, since_days: int = 7) -> list[dict]:
    """Per reviewer: decisions today, in the last `since_days` days, and by kind over all time."""
    now = timezone.now()
    start_of_day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = (
        Review.objects.values("reviewer__username")
        .annotate(
            total=Count("id"),
            today=Count("id", filter=Q(created_at__gte=start_of_day)),
            recent=Count("id", filter=Q(created_at__gte=now - timedelta(days=since_days))),
            approved=Count("id", filter=Q(decision=Review.Decision.APPROVE)),
            rejected=Count("id", filter=Q(decision=Review.Decision.REJECT)),
            sent_back=Count("id", filter=Q(decision=Review.Decision.SEND_BACK)),
        )
        .order_by("-today", "-total", "reviewer__username")
    )
    return list(rows)
