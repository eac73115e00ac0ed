"""Writes for review: claim, approve, reject, send back, bulk decisions, and threaded comments.

Every status change goes through services.task_transition, so each one is audited (who, when,
from, to, why) as a StatusChange and shown on the task. A task another reviewer holds by a live
claim cannot be decided (review.assignments); deciding a task ends its claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from curation import policy
from curation.errors import CurationError
from curation.gameability import blocks_approval
from curation.models import Comment, Task, TaskStatus, TaskVersion
from curation.services import task_transition, task_version_write
from review import assignments, double_review, notifications
from review.errors import ReviewError
from review.models import Review

REVIEWABLE = (TaskStatus.SUBMITTED, TaskStatus.IN_REVIEW)


def _reviewer_check(*, task: Task, reviewer: AbstractBaseUser) -> None:
    if not policy.is_reviewer(reviewer):
        raise ReviewError("Only reviewers and staff can review tasks.")
    if not policy.task_may_review(reviewer, task):
        raise ReviewError(f"{task.key} is your own task: another reviewer must review it.")


@transaction.atomic
def review_claim(*, task: Task, reviewer: AbstractBaseUser) -> Task:
    """Claim a task for `reviewer` (review.assignments: hidden from other reviewers until the claim
    expires) and take it into review (submitted -> in_review; a task in review stays so)."""
    _reviewer_check(task=task, reviewer=reviewer)
    assignments.claim_take(task=task, reviewer=reviewer)
    task.refresh_from_db(fields=["status"])
    if task.status == TaskStatus.IN_REVIEW:
        return task
    if task.status != TaskStatus.SUBMITTED:
        raise ReviewError(f"{task.key} is {task.status}, not waiting for review.")
    return _into_review(task=task, reviewer=reviewer)


def _into_review(*, task: Task, reviewer: AbstractBaseUser) -> Task:
    return task_transition(task=task, to_status=TaskStatus.IN_REVIEW, by=reviewer, reason=f"claimed by {reviewer}")


@transaction.atomic
def _review_decide(
    *, task: Task, reviewer: AbstractBaseUser, decision: str, to_status: str, comment: str, defect: str = ""
) -> Review | None:
    task = _review_start(task=task, reviewer=reviewer)
    assignments.claim_end(task=task)
    if double_review.first_decision_hold(
        task=task, reviewer=reviewer, decision=decision, comment=comment, defect=defect
    ):
        return None  # drawn for two reviews: it takes effect once a second, blind reviewer agrees
    task = task_transition(task=task, to_status=to_status, by=reviewer, reason=comment.strip())
    return _review_write(
        task=task,
        version_id=task.current_version_id,
        reviewer=reviewer,
        decision=decision,
        comment=comment,
        defect=defect,
    )


def _review_start(*, task: Task, reviewer: AbstractBaseUser) -> Task:
    """The checks every decision and fix make (reviewer, claim, a pending second review), then the task in review."""
    _reviewer_check(task=task, reviewer=reviewer)
    task.refresh_from_db(fields=["status", "current_version"])
    if task.status not in REVIEWABLE:
        raise ReviewError(f"{task.key} is {task.status}; only submitted or in-review tasks can be decided.")
    assignments.claim_check(task=task, reviewer=reviewer)
    double_review.pending_check(task=task)
    if task.status == TaskStatus.SUBMITTED:
        task = _into_review(task=task, reviewer=reviewer)
    return task


def _review_write(
    *, task: Task, version_id: int | None, reviewer: AbstractBaseUser, decision: str, comment: str, defect: str
) -> Review:
    review = Review.objects.create(
        task=task,
        task_version_id=version_id,
        reviewer=reviewer,
        decision=decision,
        comment=comment.strip(),
        defect=defect,
    )
    if comment.strip():
        Comment.objects.create(task=task, author=reviewer, body=f"[{decision.replace('_', ' ')}] {comment.strip()}")
    return review


def _defect_check(defect: str) -> str:
    if defect not in Review.Defect.values:
        raise ReviewError(f"Name the defect: one of {', '.join(Review.Defect.values)}.")
    return defect


def review_approve(*, task: Task, reviewer: AbstractBaseUser, comment: str = "") -> Review | None:
    """Approve a submitted or in-review task. A task whose current version failed its audit cannot be
    approved, nor one flagged gameable that no reviewer has overridden. None: the task was drawn for
    two reviews, and the approval waits for a second, blind reviewer (review.double_review)."""
    task.refresh_from_db(fields=["current_version"])  # a fix may have made a new version since the page loaded
    current = TaskVersion.objects.filter(pk=task.current_version_id).first()  # fresh: an override may be new
    if current is not None and current.audit_passed is False:
        raise ReviewError(f"{task.key} failed its audit; send it back instead of approving it.")
    blocked = blocks_approval(current)
    if blocked:
        raise ReviewError(f"{task.key} cannot be approved: {blocked}.")
    return _review_decide(
        task=task, reviewer=reviewer, decision=Review.Decision.APPROVE, to_status=TaskStatus.APPROVED, comment=comment
    )


def review_reject(
    *, task: Task, reviewer: AbstractBaseUser, comment: str, defect: str = Review.Defect.OTHER
) -> Review | None:
    """Reject a task; the comment saying why is mandatory, and the defect (Review.Defect) is recorded.
    None: it waits for a second, blind reviewer."""
    if not comment.strip():
        raise ReviewError("Say why: a comment is required to reject a task.")
    return _review_decide(
        task=task,
        reviewer=reviewer,
        decision=Review.Decision.REJECT,
        to_status=TaskStatus.REJECTED,
        comment=comment,
        defect=_defect_check(defect),
    )


@transaction.atomic
def review_fix(*, task: Task, reviewer: AbstractBaseUser, content: dict, defect: str, comment: str = "") -> TaskVersion:
    """A reviewer corrects a task under review (prompt, answer, verifier: the upload format's fields in
    `content`): a new version, audited again, becomes current; rollouts and calibrations stay with the
    old version. The task stays in review (the reviewer may now approve it); the fix is a Review of the
    old version with its defect. Raises ReviewError naming the field for invalid content."""
    _defect_check(defect)
    task = _review_start(task=task, reviewer=reviewer)
    fixed_version_id = task.current_version_id
    version = task_version_write(task=task, by=reviewer, content=content, action="fix")
    _review_write(
        task=task,
        version_id=fixed_version_id,
        reviewer=reviewer,
        decision=Review.Decision.FIX,
        comment=comment or f"fixed: version {version.number}",
        defect=defect,
    )
    return version


def review_send_back(*, task: Task, reviewer: AbstractBaseUser, comment: str) -> Review | None:
    """Return a task to its author (changes_requested) with a comment saying what to change."""
    if not comment.strip():
        raise ReviewError("Say what to change: a comment is required to send a task back.")
    return _review_decide(
        task=task,
        reviewer=reviewer,
        decision=Review.Decision.SEND_BACK,
        to_status=TaskStatus.CHANGES_REQUESTED,
        comment=comment,
    )


@dataclass
class BulkReviewResult:
    decided: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


DECISIONS: dict[str, Callable[..., Review | None]] = {
    Review.Decision.APPROVE: review_approve,
    Review.Decision.REJECT: review_reject,
    Review.Decision.SEND_BACK: review_send_back,
}


def reviews_bulk(
    *, tasks: QuerySet[Task], reviewer: AbstractBaseUser, decision: str, comment: str = ""
) -> BulkReviewResult:
    """Apply one decision to every task in `tasks` (the whole filter, not a page).

    Each task is decided in its own transaction; tasks that cannot be decided (own task, failed
    audit, already decided) are listed as skipped with the reason.
    """
    if decision not in DECISIONS:
        raise ReviewError(f"Unknown decision {decision!r}; use approve, reject or send_back.")
    if decision != Review.Decision.APPROVE and not comment.strip():
        raise ReviewError("Say why: a comment is required to reject or send back tasks in bulk.")
    result = BulkReviewResult()
    for task in tasks.select_related("current_version").order_by("pk").iterator(chunk_size=500):
        try:
            DECISIONS[decision](task=task, reviewer=reviewer, comment=comment)
            result.decided.append(task.key)
        except CurationError as error:
            result.skipped.append(f"{task.key}: {error}")
    return result


def tasks_submit_bulk(*, tasks: QuerySet[Task], author: AbstractBaseUser) -> BulkReviewResult:
    """Submit every task in `tasks` for review (draft or sent back -> submitted).

    Authors submit their own tasks (staff any); each task moves in its own transaction, and tasks
    that cannot move (someone else's, failed audit, wrong status) are listed as skipped with the reason.
    """
    if not policy.is_author(author):
        raise ReviewError("Only authors and staff can submit tasks.")
    result = BulkReviewResult()
    for task in tasks.select_related("current_version").order_by("pk").iterator(chunk_size=500):
        if not policy.task_may_change(author, task):
            result.skipped.append(f"{task.key}: not your task")
            continue
        try:
            task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=author, reason="bulk submit")
            result.decided.append(task.key)
        except CurationError as error:
            result.skipped.append(f"{task.key}: {error}")
    return result


BULK_ACTIONS = ("submit", *DECISIONS)


def tasks_bulk_action(
    *, tasks: QuerySet[Task], user: AbstractBaseUser, action: str, comment: str = ""
) -> BulkReviewResult:
    """One status change for every task in `tasks`: `submit` (authors) or a review decision,
    `approve`, `reject` or `send_back` (reviewers; reject and send back need a comment)."""
    if action == "submit":
        return tasks_submit_bulk(tasks=tasks, author=user)
    if action not in DECISIONS:
        raise ReviewError(f"Unknown action {action!r}; use one of {', '.join(BULK_ACTIONS)}.")
    if not policy.is_reviewer(user):
        raise ReviewError("Only reviewers and staff can review tasks.")
    return reviews_bulk(tasks=tasks, reviewer=user, decision=action, comment=comment)


@transaction.atomic
def comment_add(*, task: Task, author: AbstractBaseUser, body: str, parent: Comment | None = None) -> Comment:
    """Add a comment, or a reply when `parent` is given (replies attach to the thread's root); everyone
    it @mentions who may see the task is notified (review.notifications)."""
    if not policy.task_may_discuss(author, task):
        raise ReviewError("Only the task's author and reviewers can comment on it.")
    if not body.strip():
        raise ReviewError("A comment cannot be empty.")
    if parent is not None:
        if parent.task_id != task.pk:
            raise ReviewError("A reply must belong to the same task as its comment.")
        while parent.parent_id is not None:
            parent = parent.parent
    comment = Comment.objects.create(task=task, author=author, body=body.strip(), parent=parent)
    notifications.mentions_notify(comment=comment)
    return comment


def comment_resolve(*, comment: Comment, by: AbstractBaseUser) -> Comment:
    """Mark a thread resolved (its root comment); resolving twice changes nothing."""
    if not policy.task_may_discuss(by, comment.task):
        raise ReviewError("Only the task's author and reviewers can resolve comments.")
    while comment.parent_id is not None:
        comment = comment.parent
    if comment.resolved_at is None:
        comment.resolved_at = timezone.now()
        comment.resolved_by = by
        comment.save(update_fields=["resolved_at", "resolved_by"])
    return comment
