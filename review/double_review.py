"""Two independent reviews of one task, gold items, agreement between reviewers, adjudication.

Built on the blind-review records (review.blind_reviews): a first reviewer's approve or reject of a
drawn task version (a deterministic PASSBAND_DOUBLE_REVIEW_SHARE, `drawn_for_double_review`) does
not take effect; it becomes a BlindItem of kind double_review (decided_by the first reviewer,
decision pass = approve, fail = reject) that a second reviewer judges blind. When both agree the
decision takes effect; when they disagree the item waits in the leads' adjudication queue. Gold
items (kind gold_task) carry a decision a lead knows and sit in the same queue, looking the same.

Agreement (engine.stats.agreement does the maths): per reviewer pair and per environment, percent
agreement and Cohen's kappa with n and interval; per reviewer, accuracy on gold items.
docs/review.md, "Two reviews, agreement and adjudication".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from accounts.audit import audit_record
from curation import policy
from curation.models import Task, TaskStatus, TaskVersion
from curation.services import task_transition
from engine import stats
from review import blind_reviews
from review.errors import ReviewError
from review.models import Adjudication, BlindItem, BlindReview, Review

TASK_KINDS = (BlindItem.Kind.DOUBLE_REVIEW, BlindItem.Kind.GOLD_TASK)
PASS, FAIL = BlindReview.Verdict.PASS, BlindReview.Verdict.FAIL
# A task's decision as a blind verdict, and back.
VERDICT_OF = {Review.Decision.APPROVE: PASS, Review.Decision.REJECT: FAIL}
DECISION_OF = {PASS: Review.Decision.APPROVE, FAIL: Review.Decision.REJECT}
STATUS_OF = {PASS: TaskStatus.APPROVED, FAIL: TaskStatus.REJECTED}
GOLD_REVIEWS_WANTED = 10_000  # every reviewer may answer a gold item once


def drawn_for_double_review(version_id: int, *, share: float | None = None, seed: int | None = None) -> bool:
    """Whether a task version is in the share that gets two reviews: the first 8 bytes of
    sha256("seed:double_review:version id") below share * 2**64, so the draw is the same on every run."""
    share = settings.PASSBAND_DOUBLE_REVIEW_SHARE if share is None else share
    seed = settings.PASSBAND_DOUBLE_REVIEW_SEED if seed is None else seed
    digest = hashlib.sha256(f"{seed}:double_review:{version_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


# Reads ------------------------------------------------------------------------------------------


def _disagreeing() -> Q:
    """Items whose first review disagrees with their decision."""
    return Q(kind=BlindItem.Kind.DOUBLE_REVIEW, reviews__isnull=False) & ~Q(reviews__verdict=F("decision"))


def _unsettled() -> QuerySet[BlindItem]:
    """Double reviews still open: no second verdict that agrees, no lead's adjudication."""
    return BlindItem.objects.filter(kind=BlindItem.Kind.DOUBLE_REVIEW, adjudication__isnull=True).exclude(
        reviews__verdict=F("decision")
    )


def queue_without_pending(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """`tasks` less those whose current version waits for a second review or for a lead."""
    return tasks.filter(~Exists(_unsettled().filter(task_version=OuterRef("current_version"))))


def pending_check(*, task: Task) -> None:
    """Raise ReviewError when `task`'s current version waits for a second review or a lead (decisions call it)."""
    if _unsettled().filter(task_version_id=task.current_version_id).exists():
        raise ReviewError(
            f"{task.key} waits for a second, blind review (or a lead's adjudication), not for your decision."
        )


def second_reviews_open(*, reviewer: AbstractBaseUser) -> QuerySet[BlindItem]:
    """Task items (second reviews and gold) `reviewer` may still judge, oldest first; never one they
    decided first."""
    return blind_reviews.blind_items_open(reviewer=reviewer, kind=TASK_KINDS).exclude(
        kind=BlindItem.Kind.DOUBLE_REVIEW, decided_by=reviewer.get_username()
    )


def adjudication_queue() -> QuerySet[BlindItem]:
    """Double reviews whose two reviewers disagree and that no lead has settled, oldest first."""
    return (
        BlindItem.objects.filter(_disagreeing(), adjudication__isnull=True)
        .select_related("task_version__task__environment")
        .prefetch_related("reviews__reviewer")
        .distinct()
        .order_by("created_at", "id")
    )


@dataclass(frozen=True)
class TaskBlindView:
    """What a second reviewer sees of a task: its content and audit, never a decision or a review."""

    environment: str
    key: str
    version: int
    prompt: list[dict[str, Any]]
    answer: str
    verifier: dict[str, Any]
    audit_passed: bool | None
    audit_problems: list[str]


def task_blind_view(*, item: BlindItem) -> TaskBlindView:
    """The one place that decides what a task item shows (see TaskBlindView)."""
    version = item.task_version
    prompt = version.prompt if isinstance(version.prompt, list) else [{"role": "user", "content": str(version.prompt)}]
    return TaskBlindView(
        environment=version.task.environment.name,
        key=version.task.key,
        version=version.number,
        prompt=prompt,
        answer=version.answer,
        verifier=version.verifier or {},
        audit_passed=version.audit_passed,
        audit_problems=list(version.audit_problems or []),
    )


@dataclass(frozen=True)
class PairAgreement:
    """Two raters (reviewers, or first and second reviewer of one environment) over the same items."""

    first: str
    second: str
    measures: stats.Agreement


def _double_review_rows(items: QuerySet[BlindItem]) -> list[dict[str, Any]]:
    return list(
        BlindReview.objects.filter(item__in=items)
        .values("item__decided_by", "reviewer__username", "item__task_version__task__environment__name")
        .annotate(
            first_pass_second_pass=Count("id", filter=Q(item__decision=PASS, verdict=PASS)),
            first_pass_second_fail=Count("id", filter=Q(item__decision=PASS, verdict=FAIL)),
            first_fail_second_pass=Count("id", filter=Q(item__decision=FAIL, verdict=PASS)),
            first_fail_second_fail=Count("id", filter=Q(item__decision=FAIL, verdict=FAIL)),
        )
        .order_by()
    )


def _counts(row: dict[str, Any], *, swap: bool = False) -> dict[tuple[str, str], int]:
    counts = {
        (PASS, PASS): row["first_pass_second_pass"],
        (PASS, FAIL): row["first_pass_second_fail"],
        (FAIL, PASS): row["first_fail_second_pass"],
        (FAIL, FAIL): row["first_fail_second_fail"],
    }
    return {(second, first): count for (first, second), count in counts.items()} if swap else counts


def _add(total: dict[tuple[str, str], int], counts: dict[tuple[str, str], int]) -> None:
    for pair, count in counts.items():
        total[pair] = total.get(pair, 0) + count


def reviewer_agreement(*, level: float = 0.95) -> dict[str, list[PairAgreement]]:
    """Agreement of two independent reviews, counted by the database: ``{"pairs": [...], "environments":
    [...]}``. A pair's labels are lined up by person (the name first in alphabetical order is `first`,
    whichever of them reviewed first); an environment's by turn (first reviewer, second reviewer)."""
    rows = _double_review_rows(BlindItem.objects.filter(kind=BlindItem.Kind.DOUBLE_REVIEW))
    pairs: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
    environments: dict[str, dict[tuple[str, str], int]] = {}
    for row in rows:
        first, second = row["item__decided_by"], row["reviewer__username"]
        key = tuple(sorted((first, second)))
        _add(pairs.setdefault(key, {}), _counts(row, swap=key != (first, second)))
        _add(environments.setdefault(row["item__task_version__task__environment__name"], {}), _counts(row))
    return {
        "pairs": [
            PairAgreement(first, second, stats.agreement_from_counts(counts, level=level))
            for (first, second), counts in sorted(pairs.items())
        ],
        "environments": [
            PairAgreement(name, "", stats.agreement_from_counts(counts, level=level))
            for name, counts in sorted(environments.items())
        ],
    }


@dataclass(frozen=True)
class GoldAccuracy:
    reviewer: str
    accuracy: stats.Proportion


def gold_accuracy(*, level: float = 0.95) -> list[GoldAccuracy]:
    """Per reviewer, the share of gold items whose known decision their verdict matched, with n and interval."""
    rows = (
        BlindReview.objects.filter(item__kind=BlindItem.Kind.GOLD_TASK)
        .values("reviewer__username")
        .annotate(n=Count("id"), right=Count("id", filter=Q(verdict=F("item__decision"))))
        .order_by("reviewer__username")
    )
    return [
        GoldAccuracy(row["reviewer__username"], stats.proportion(successes=row["right"], n=row["n"], level=level))
        for row in rows
    ]


# Writes -----------------------------------------------------------------------------------------


def first_decision_hold(
    *, task: Task, reviewer: AbstractBaseUser, decision: str, comment: str, defect: str = ""
) -> BlindItem | None:
    """When `task`'s current version is drawn for two reviews and has none yet, keep the first
    reviewer's approve or reject as a double_review item (the task stays in review) and return it;
    otherwise None, and the decision takes effect as usual."""
    if decision not in VERDICT_OF or task.current_version_id is None:
        return None
    if not drawn_for_double_review(task.current_version_id):
        return None
    if BlindItem.objects.filter(kind=BlindItem.Kind.DOUBLE_REVIEW, object_id=task.current_version_id).exists():
        return None  # the second decision, by a lead or after adjudication: it takes effect
    return BlindItem.objects.create(
        kind=BlindItem.Kind.DOUBLE_REVIEW,
        object_id=task.current_version_id,
        task_version_id=task.current_version_id,
        content="",
        decided_by=reviewer.get_username(),
        decision=VERDICT_OF[decision],
        decided_note=comment.strip(),
        decided_defect=defect,
        reviews_wanted=1,
    )


def _apply(*, item: BlindItem, verdict: str, by: AbstractBaseUser, reason: str, reviews: list[tuple[Any, str]]) -> None:
    """Make `verdict` the task's decision (approve or reject) when the task still waits on this version,
    recording one Review per (person, comment) in `reviews`."""
    task = Task.objects.select_for_update().get(pk=item.task_version.task_id)
    if task.current_version_id != item.task_version_id or task.status != TaskStatus.IN_REVIEW:
        return  # the task moved on (a new version, withdrawn): the verdicts stay as measurements only
    task_transition(task=task, to_status=STATUS_OF[verdict], by=by, reason=reason)
    # A rejection carries the defect the first reviewer named (or "other" when they approved).
    defect = (item.decided_defect or Review.Defect.OTHER) if verdict == FAIL else ""
    for person, comment in reviews:
        Review.objects.create(
            task=task,
            task_version_id=item.task_version_id,
            reviewer=person,
            decision=DECISION_OF[verdict],
            comment=comment,
            defect=defect,
        )


@transaction.atomic
def second_review_record(*, item: BlindItem, reviewer: AbstractBaseUser, verdict: str, note: str = "") -> BlindReview:
    """Record a blind verdict on a task item (review.blind_reviews.blind_review_record's checks). On
    a double review that agrees with the first decision, the decision takes effect; one that disagrees
    goes to the leads' adjudication queue."""
    review = blind_reviews.blind_review_record(item=item, reviewer=reviewer, verdict=verdict, note=note)
    if item.kind == BlindItem.Kind.DOUBLE_REVIEW and review.verdict == item.decision:
        first = get_user_model().objects.filter(username=item.decided_by).first()
        both = " / ".join(part for part in (item.decided_note, review.note) if part)
        reason = f"two blind reviews agree ({item.decided_by}, {reviewer.get_username()})" + (
            f": {both}" if both else ""
        )
        people = [(first, item.decided_note), (reviewer, review.note)] if first else [(reviewer, review.note)]
        _apply(item=item, verdict=review.verdict, by=reviewer, reason=reason, reviews=people)
    return review


@transaction.atomic
def adjudicate(*, item: BlindItem, lead: AbstractBaseUser, verdict: str, comment: str = "") -> Adjudication:
    """A lead's final approve (pass) or reject (fail) of a disagreed double review; it takes effect on the
    task. Raises ReviewError for a lead who may not, an item not in dispute, or one already settled."""
    if verdict not in VERDICT_OF.values():
        raise ReviewError("Choose approve or reject.")
    if not policy.allows(lead, policy.ADJUDICATE, item):
        raise ReviewError("Only leads adjudicate, and never on their own tasks.")
    item = BlindItem.objects.select_for_update().get(pk=item.pk)
    if not BlindItem.objects.filter(_disagreeing(), pk=item.pk).exists():
        raise ReviewError("This item is not a disagreement between two reviewers.")
    if Adjudication.objects.filter(item=item).exists():
        raise ReviewError("A lead has already settled this disagreement.")
    if verdict == FAIL and not comment.strip():
        raise ReviewError("Say why: a comment is required to reject a task.")
    adjudication = Adjudication.objects.create(item=item, lead=lead, decision=verdict, comment=comment.strip())
    audit_record(actor=lead, action="adjudicate", obj=item.task_version.task, detail={"decision": DECISION_OF[verdict]})
    reason = f"adjudicated by {lead.get_username()}" + (f": {comment.strip()}" if comment.strip() else "")
    _apply(item=item, verdict=verdict, by=lead, reason=reason, reviews=[(lead, comment.strip())])
    return adjudication


def gold_add(*, task: Task, decision: str, by: AbstractBaseUser) -> BlindItem:
    """Make `task`'s current version a gold item whose right decision is `decision` (approve or reject),
    mixed into the second-review queue; adding it twice changes nothing."""
    if not policy.is_lead(by):
        raise ReviewError("Only leads and staff add gold items.")
    if decision not in VERDICT_OF:
        raise ReviewError("A gold item's decision is approve or reject.")
    version = TaskVersion.objects.filter(pk=task.current_version_id).first()
    if version is None:
        raise ReviewError(f"{task.key} has no content to review.")
    item, _ = BlindItem.objects.get_or_create(
        kind=BlindItem.Kind.GOLD_TASK,
        object_id=version.pk,
        defaults={
            "task_version": version,
            "content": "",
            "decided_by": by.get_username(),
            "decision": VERDICT_OF[decision],
            "reviews_wanted": GOLD_REVIEWS_WANTED,
        },
    )
    return item
