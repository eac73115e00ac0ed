"""Defect rates: of the tasks reviewers decided, the share rejected or fixed, and for which defect.

Counted by the database from Review rows (each reject and fix names a Review.Defect), per author
(the task's owner) or per environment. Authors see their own row; reviewers and leads see all.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q

from curation import policy
from engine import stats
from review.models import Review

DECIDED = (Review.Decision.APPROVE, Review.Decision.REJECT, Review.Decision.FIX)
DEFECTIVE = (Review.Decision.REJECT, Review.Decision.FIX)
GROUPS = {"author": "task__owner__username", "environment": "task__environment__name"}


@dataclass(frozen=True)
class DefectRate:
    name: str  # the author's username or the environment's name
    rate: stats.Proportion  # rejected or fixed, of the reviews that decided or fixed
    by_defect: dict[str, int]


def defect_rates(*, group: str, viewer: AbstractBaseUser, level: float = 0.95) -> list[DefectRate]:
    """Per author or environment (`group`), the defect rate with its n and Wilson interval and the count
    of each defect; an author who is not a reviewer gets their own row only."""
    if group not in GROUPS:
        raise ValueError(f"group must be one of {', '.join(GROUPS)}")
    reviews = Review.objects.filter(decision__in=DECIDED)
    if not policy.is_reviewer(viewer):
        reviews = reviews.filter(task__owner=viewer)
    field = GROUPS[group]
    counts = {f"defect_{defect}": Count("id", filter=Q(defect=defect)) for defect in Review.Defect.values}
    rows = (
        reviews.values(field)
        .annotate(n=Count("id"), defective=Count("id", filter=Q(decision__in=DEFECTIVE)), **counts)
        .order_by(field)
    )
    return [
        DefectRate(
            name=row[field],
            rate=stats.proportion(successes=row["defective"], n=row["n"], level=level),
            by_defect={defect: row[f"defect_{defect}"] for defect in Review.Defect.values},
        )
        for row in rows
    ]
