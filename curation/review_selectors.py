"""Reads for the review queue: tasks waiting for review in priority order, and reviewer progress."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import (
    Case,
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.utils import timezone

from calibration.models import Band, Calibration
from curation.models import Comment, Environment, Review, Task, TaskStatus
from curation.selectors import tasks_with_calibration

# Lower sorts first: what most needs a human look comes first.
PRIORITIES = [
    ("verifier_trouble", "verifier trouble"),
    ("audit_failed", "audit failed"),
    ("too_easy", "too easy"),
    ("too_hard", "too hard"),
    ("normal", "no flag"),
]
FLAGS = [name for name, _ in PRIORITIES if name != "normal"]


def _current_calibrations(**filters) -> QuerySet[Calibration]:
    return Calibration.objects.filter(task_version=OuterRef("current_version"), **filters)


def review_queue(
    *,
    user: AbstractBaseUser,
    environment: Environment | None = None,
    band: str = "",
    flag: str = "",
    search: str = "",
) -> QuerySet[Task]:
    """Submitted and in-review tasks, flagged first (verifier trouble, audit failures, too easy, too hard).

    Each task carries its latest calibration's fields (see tasks_with_calibration) and a
    `priority` from 0 (verifier trouble) to 4 (no flag). Ties go to the task waiting longest.
    """
    tasks = tasks_with_calibration(user=user, environment=environment, band=band, search=search)
    tasks = tasks.filter(status__in=[TaskStatus.SUBMITTED, TaskStatus.IN_REVIEW]).annotate(
        has_verifier_trouble=Exists(_current_calibrations(flags__contains=["verifier_trouble"])),
        is_too_easy=Exists(_current_calibrations(band=Band.RETIRE)),
        is_too_hard=Exists(_current_calibrations(band=Band.TOO_HARD)),
    )
    tasks = tasks.annotate(
        priority=Case(
            When(has_verifier_trouble=True, then=Value(0)),
            When(current_version__audit_passed=False, then=Value(1)),
            When(is_too_easy=True, then=Value(2)),
            When(is_too_hard=True, then=Value(3)),
            default=Value(4),
            output_field=IntegerField(),
        )
    )
    if flag:
        index = [name for name, _ in PRIORITIES].index(flag) if flag in FLAGS else None
        tasks = tasks.filter(priority=index) if index is not None else tasks.none()
    return tasks.order_by("priority", "updated_at", "pk")


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
