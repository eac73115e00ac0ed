"""Reads for releases: which releases a user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from accounts.permissions import REVIEWERS, TRAINERS, in_group
from releases.models import Release


def releases_visible_to(user: AbstractBaseUser) -> QuerySet[Release]:
    """Trainers, reviewers and staff share every release; anyone else sees the ones they made."""
    releases = Release.objects.select_related("probe_model", "created_by")
    if in_group(user, TRAINERS, REVIEWERS):
        return releases
    return releases.filter(created_by=user)
