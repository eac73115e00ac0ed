"""Sharing the review queue: claims, assignment (round-robin or by domain), expiry and reassignment.

A claim (ReviewClaim) gives one reviewer a queue task until it expires (PASSBAND_CLAIM_MINUTES).
While it lasts the task is hidden from every other reviewer's queue (`queue_without_others_claims`)
and no one else may decide it (`claim_check`, called by every review decision). An expired claim
counts for nothing: it is replaced by the next claim, never needs a sweep. Leads (and staff) see
who holds what, assign the unclaimed queue and reassign. docs/review.md, "Sharing the queue".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import cycle

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from accounts.audit import audit_record
from accounts.permissions import LEADS, REVIEWERS
from curation import policy
from curation.models import Task, TaskStatus
from review.errors import ReviewError
from review.models import ReviewClaim, ReviewerDomain

WAITING = (TaskStatus.SUBMITTED, TaskStatus.IN_REVIEW)
STRATEGIES = ("round_robin", "domain")


def _expiry(now: datetime) -> datetime:
    return now + timedelta(minutes=settings.PASSBAND_CLAIM_MINUTES)


# Reads ------------------------------------------------------------------------------------------


def claims_active() -> QuerySet[ReviewClaim]:
    """Claims that still hold, on tasks still waiting for review, soonest to expire first."""
    return (
        ReviewClaim.objects.filter(expires_at__gt=timezone.now(), task__status__in=WAITING)
        .select_related("task__environment", "reviewer", "assigned_by")
        .order_by("reviewer__username", "expires_at", "pk")
    )


def queue_without_others_claims(tasks: QuerySet[Task], *, reviewer: AbstractBaseUser) -> QuerySet[Task]:
    """`tasks` less those another reviewer holds by a live claim; the reviewer's own come first."""
    now = timezone.now()
    live = ReviewClaim.objects.filter(task=OuterRef("pk"), expires_at__gt=now)
    return tasks.annotate(
        claimed_by_other=Exists(live.exclude(reviewer=reviewer)),
        claimed_by_me=Exists(live.filter(reviewer=reviewer)),
    ).filter(claimed_by_other=False)


def claim_holder(task: Task) -> ReviewClaim | None:
    """The live claim on `task`, if any."""
    return ReviewClaim.objects.filter(task=task, expires_at__gt=timezone.now()).select_related("reviewer").first()


def reviewers() -> QuerySet:
    """Everyone who reviews (reviewers and leads; staff only when they hold a review role), by name."""
    User = get_user_model()
    return (
        User.objects.filter(is_active=True, groups__name__in=[REVIEWERS, LEADS])
        .distinct()
        .order_by("username")
        .prefetch_related("review_domains")
    )


# Writes -----------------------------------------------------------------------------------------


def claim_check(*, task: Task, reviewer: AbstractBaseUser) -> None:
    """Raise ReviewError when another reviewer holds `task` by a live claim (what decisions call)."""
    claim = claim_holder(task)
    if claim is not None and claim.reviewer_id != reviewer.pk:
        raise ReviewError(
            f"{task.key} is claimed by {claim.reviewer.get_username()} until "
            f"{timezone.localtime(claim.expires_at):%H:%M}; take another task or ask a lead to reassign it."
        )


def _hold(*, task: Task, reviewer: AbstractBaseUser, how: str, by: AbstractBaseUser | None) -> ReviewClaim:
    now = timezone.now()
    claim, _ = ReviewClaim.objects.update_or_create(
        task=task,
        defaults={"reviewer": reviewer, "how": how, "assigned_by": by, "claimed_at": now, "expires_at": _expiry(now)},
    )
    return claim


@transaction.atomic
def claim_take(*, task: Task, reviewer: AbstractBaseUser) -> ReviewClaim:
    """`reviewer` claims `task` (or renews their own claim). Raises ReviewError when the task is not
    waiting for review, is the reviewer's own, or another reviewer holds it."""
    task = Task.objects.select_for_update().get(pk=task.pk)
    if not policy.task_may_review(reviewer, task):
        raise ReviewError(f"{task.key} is your own task: another reviewer must review it.")
    if task.status not in WAITING:
        raise ReviewError(f"{task.key} is {task.status}, not waiting for review.")
    claim_check(task=task, reviewer=reviewer)
    return _hold(task=task, reviewer=reviewer, how=ReviewClaim.How.CLAIMED, by=reviewer)


def claim_release(*, task: Task, by: AbstractBaseUser) -> None:
    """Give a claim up: its holder, or a lead. Releasing what nobody holds changes nothing."""
    claim = ReviewClaim.objects.filter(task=task).first()
    if claim is None:
        return
    if claim.reviewer_id != by.pk and not policy.is_lead(by):
        raise ReviewError(f"Only {claim.reviewer.get_username()} or a lead can release this claim.")
    claim.delete()


def claim_end(*, task: Task) -> None:
    """The task was decided: its claim has served (called by the review decisions)."""
    ReviewClaim.objects.filter(task=task).delete()


def _lead_check(user: AbstractBaseUser) -> None:
    if not policy.is_lead(user):
        raise ReviewError("Only leads and staff assign and reassign review work.")


@transaction.atomic
def claim_reassign(*, task: Task, to_reviewer: AbstractBaseUser, by: AbstractBaseUser) -> ReviewClaim:
    """A lead gives `task` to `to_reviewer`, whoever held it, with a fresh expiry."""
    _lead_check(by)
    task = Task.objects.select_for_update().get(pk=task.pk)
    if task.status not in WAITING:
        raise ReviewError(f"{task.key} is {task.status}, not waiting for review.")
    if not policy.task_may_review(to_reviewer, task):
        raise ReviewError(f"{to_reviewer.get_username()} may not review {task.key} (not a reviewer, or their own).")
    audit_record(actor=by, action="reassign", obj=task, detail={"to": to_reviewer.get_username()})
    return _hold(task=task, reviewer=to_reviewer, how=ReviewClaim.How.REASSIGNED, by=by)


@dataclass
class AssignResult:
    assigned: dict[str, list[str]] = field(default_factory=dict)  # reviewer -> task keys
    unassigned: list[str] = field(default_factory=list)  # "key: why"

    @property
    def count(self) -> int:
        return sum(len(keys) for keys in self.assigned.values())


def queue_assign(*, tasks: QuerySet[Task], strategy: str, by: AbstractBaseUser, limit: int = 500) -> AssignResult:
    """Share the unclaimed tasks of `tasks` (at most `limit`, oldest first) among the reviewers.

    `round_robin`: every reviewer in turn, by name; `domain`: in turn among the reviewers who take
    the task's environment domain (ReviewerDomain). A reviewer never gets their own task; a task
    nobody may take is listed in `unassigned` with the reason. Running it again assigns only what is
    still unclaimed."""
    _lead_check(by)
    if strategy not in STRATEGIES:
        raise ReviewError(f"Unknown strategy {strategy!r}; use {' or '.join(STRATEGIES)}.")
    people = list(reviewers())
    if not people:
        raise ReviewError("There is nobody in the reviewers or leads group to assign work to.")
    domains = {person.pk: {row.domain for row in person.review_domains.all()} for person in people}
    now = timezone.now()
    waiting = (
        tasks.filter(status__in=WAITING)
        .exclude(Q(review_claim__expires_at__gt=now))
        .select_related("environment")
        .order_by("created_at", "pk")[:limit]
    )
    turns: dict[str, cycle] = {}
    result = AssignResult()
    how = ReviewClaim.How.ROUND_ROBIN if strategy == "round_robin" else ReviewClaim.How.DOMAIN
    for task in waiting:
        group = "" if strategy == "round_robin" else task.environment.domain
        candidates = [
            person
            for person in people
            if (not group or group in domains[person.pk]) and policy.task_may_review(person, task)
        ]
        if not candidates:
            why = "no reviewer takes its domain " + repr(group) if group else "nobody but its author reviews"
            result.unassigned.append(f"{task.key}: {why}")
            continue
        # One rotation per domain, so each domain's work is shared evenly among its reviewers.
        rotation = turns.setdefault(group, cycle([person.pk for person in people]))
        allowed = {person.pk for person in candidates}
        person_pk = next(pk for pk in rotation if pk in allowed)
        person = next(person for person in candidates if person.pk == person_pk)
        with transaction.atomic():
            _hold(task=task, reviewer=person, how=how, by=by)
            audit_record(actor=by, action="assign", obj=task, detail={"to": person.get_username(), "how": how})
        result.assigned.setdefault(person.get_username(), []).append(task.key)
    return result


def reviewer_domain_set(*, reviewer: AbstractBaseUser, domains: list[str], by: AbstractBaseUser) -> list[str]:
    """Set the domains `reviewer` takes when the queue is assigned by domain; returns them sorted."""
    _lead_check(by)
    if not policy.is_reviewer(reviewer):
        raise ReviewError(f"{reviewer.get_username()} is not a reviewer.")
    cleaned = sorted({domain.strip() for domain in domains if domain.strip()})
    for domain in cleaned:
        if len(domain) > 40:
            raise ReviewError(f"Domain {domain[:40]!r}… is longer than 40 characters.")
    with transaction.atomic():
        ReviewerDomain.objects.filter(reviewer=reviewer).exclude(domain__in=cleaned).delete()
        for domain in cleaned:
            ReviewerDomain.objects.get_or_create(reviewer=reviewer, domain=domain)
    return cleaned
