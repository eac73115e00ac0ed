"""Reads for curation: review progress and comment threads (which tasks a user may see: curation.policy).

Reads that join calibrations (the task list, the review queue) live in calibration.selectors.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from curation.models import Comment, Review, Task


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


def comment_threads(*, task: Task) -> list[Comment]:
    """Root comments of a task, oldest first, each with `thread_replies` (oldest first)."""
    comments = list(Comment.objects.filter(task=task).select_related("author", "resolved_by"))
    roots = [comment for comment in comments if comment.parent_id is None]
    by_root: dict[int, list[Comment]] = {}
    for comment in comments:
        if comment.parent_id is not None:
            by_root.setdefault(comment.parent_id, []).append(comment)
    for root in roots:
        root.thread_replies = by_root.get(root.pk, [])
    return roots
