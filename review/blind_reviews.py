"""Blind review: people give their own verdict on an item without seeing the decision it already has.

Written once for every kind of item (a judged rollout now; a task that two reviewers decide
independently later): the queue of items a reviewer may still review, what the reviewer is shown
(never the item's decision, nor anyone else's review), recording a verdict, and the agreement of
an item's decision with people's verdicts, counted by the database (engine.stats.agreement does
the maths). docs/verifiers.md, "Judges checked against people".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Min, OuterRef, QuerySet, Subquery

from curation import policy
from curation.models import TaskVersion
from engine import stats
from engine.verifiers.kinds import llm_judge
from review.errors import ReviewError
from review.models import BlindItem, BlindReview

NOTE_MAX_CHARS = 4000


# Reads ------------------------------------------------------------------------------------------


def blind_items_open(
    *, reviewer: AbstractBaseUser, kind: str | tuple[str, ...] = BlindItem.Kind.JUDGED_ROLLOUT
) -> QuerySet[BlindItem]:
    """Items of `kind` (one, or a tuple of kinds) that `reviewer` may still review, oldest first: they
    want more reviews, the reviewer has not given one, and the task is not the reviewer's own (staff
    excepted, as for tasks)."""
    if not policy.is_reviewer(reviewer):
        return BlindItem.objects.none()
    kinds = (kind,) if isinstance(kind, str) else kind
    items = (
        BlindItem.objects.filter(kind__in=kinds)
        .annotate(given=Count("reviews"))
        .filter(given__lt=F("reviews_wanted"))
        .exclude(reviews__reviewer=reviewer)
    )
    if not reviewer.is_staff:
        items = items.exclude(task_version__task__owner=reviewer)
    return items.order_by("created_at", "id")


@dataclass(frozen=True)
class BlindView:
    """What a reviewer sees of an item: the task's prompt, the reference answer and rubric when the
    judge was shown them, and the content under review. Nothing else: not the decision, the reward,
    the verifier's detail, the rollout, or another person's review."""

    environment: str
    prompt: list[dict[str, Any]]
    reference_answer: str | None
    rubric: str
    content: str


def blind_item_view(*, item: BlindItem) -> BlindView:
    """The one place that decides what a blind item shows (see BlindView)."""
    version = item.task_version
    verifier = version.verifier or {}
    shows_reference = llm_judge.shows_reference(verifier) and bool(version.answer)
    prompt = version.prompt if isinstance(version.prompt, list) else [{"role": "user", "content": str(version.prompt)}]
    return BlindView(
        environment=version.task.environment.name,
        prompt=prompt,
        reference_answer=version.answer if shows_reference else None,
        rubric=str(verifier.get("rubric", "")),
        content=item.content,
    )


def blind_review_of(*, item: BlindItem, reviewer: AbstractBaseUser) -> BlindReview | None:
    """The reviewer's own review of `item`, if they gave one."""
    return item.reviews.filter(reviewer=reviewer).first()


@dataclass(frozen=True)
class DeciderAgreement:
    """How one decider (a judge, under one prompt version or all of them) agrees with people."""

    decided_by: str
    decided_version: str  # "" for the row that pools every version
    sampled: int  # items drawn for review
    waiting: int  # of those, still without a review
    measures: stats.VerdictAgreement
    warning: str  # engine.stats.false_pass_warning: "", "above", "clearly above"


def decider_agreement(
    *, kind: str = BlindItem.Kind.JUDGED_ROLLOUT, decided_by: str | None = None, limit: float, level: float = 0.95
) -> list[DeciderAgreement]:
    """Per decider and version, then pooled per decider (version ""): the items' decisions against
    the first review each item got. In: the false-pass `limit` the warning compares against."""
    items = BlindItem.objects.filter(kind=kind)
    if decided_by is not None:
        items = items.filter(decided_by=decided_by)
    first_verdict = BlindReview.objects.filter(item=OuterRef("pk")).order_by("created_at", "id").values("verdict")[:1]
    rows = (
        items.annotate(verdict=Subquery(first_verdict))
        .values("decided_by", "decided_version", "decision", "verdict")
        .annotate(items=Count("id"))
        .order_by()
    )
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        for key in ((row["decided_by"], row["decided_version"]), (row["decided_by"], "")):
            group = groups.setdefault(key, {"sampled": 0, "waiting": 0, "counts": {}})
            group["sampled"] += row["items"]
            if row["verdict"] is None:
                group["waiting"] += row["items"]
            else:
                pair = (row["decision"], row["verdict"])
                group["counts"][pair] = group["counts"].get(pair, 0) + row["items"]
    result = []
    for (name, version), group in sorted(
        groups.items(), key=lambda entry: (entry[0][0], entry[0][1] == "", entry[0][1])
    ):
        measures = stats.verdict_agreement(group["counts"], level=level)
        result.append(
            DeciderAgreement(
                decided_by=name,
                decided_version=version,
                sampled=group["sampled"],
                waiting=group["waiting"],
                measures=measures,
                warning=stats.false_pass_warning(measures.false_pass, limit=limit),
            )
        )
    return result


def decided_version_examples(
    *, decided_by: str, kind: str = BlindItem.Kind.JUDGED_ROLLOUT
) -> dict[str, dict[str, Any]]:
    """Per version of a decider, what it was asked, read off one of its items' task versions: for a
    judge, ``{"rubric": ..., "include_reference": ...}``."""
    firsts = (
        BlindItem.objects.filter(kind=kind, decided_by=decided_by)
        .values("decided_version")
        .annotate(first=Min("task_version_id"))
        .order_by()
    )
    first_of = {row["decided_version"]: row["first"] for row in firsts}
    verifiers = dict(TaskVersion.objects.filter(pk__in=first_of.values()).values_list("pk", "verifier"))
    examples = {}
    for version, pk in first_of.items():
        verifier = verifiers.get(pk) or {}
        examples[version] = {
            "rubric": str(verifier.get("rubric", "")),
            "include_reference": llm_judge.shows_reference(verifier),
        }
    return examples


# Writes -----------------------------------------------------------------------------------------


@transaction.atomic
def blind_review_record(*, item: BlindItem, reviewer: AbstractBaseUser, verdict: str, note: str = "") -> BlindReview:
    """Record `reviewer`'s verdict on `item`. Raises ReviewError, saying what to do, for a verdict
    that is not one of BlindReview.Verdict, a note that is too long, a reviewer who may not review
    the item (not a reviewer, or their own task), a second review by the same person, or an item
    that has all the reviews it wants."""
    if verdict not in BlindReview.Verdict.values:
        raise ReviewError(f"Choose a verdict: {' or '.join(BlindReview.Verdict.values)}.")
    note = note.strip()
    if len(note) > NOTE_MAX_CHARS:
        raise ReviewError(f"The note is {len(note)} characters; keep it under {NOTE_MAX_CHARS}.")
    if not policy.allows(reviewer, policy.REVIEW, item):
        raise ReviewError("Only reviewers give blind verdicts, and never on their own tasks.")
    locked = BlindItem.objects.select_for_update().get(pk=item.pk)
    if locked.reviews.filter(reviewer=reviewer).exists():
        raise ReviewError("You have already given your verdict on this item; it cannot be changed.")
    if locked.reviews.count() >= locked.reviews_wanted:
        raise ReviewError("This item has all the reviews it needs; take the next one.")
    try:
        with transaction.atomic():
            return BlindReview.objects.create(item=locked, reviewer=reviewer, verdict=verdict, note=note)
    except IntegrityError:
        raise ReviewError("You have already given your verdict on this item; it cannot be changed.") from None
