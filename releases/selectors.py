"""Reads for releases: which releases a user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from curation import policy
from releases.models import Release


def releases_visible_to(user: AbstractBaseUser) -> QuerySet[Release]:
    """The releases `user` may see (curation.policy.release_may_see)."""
    return Release.objects.select_related("probe_model", "created_by").filter(policy.releases_visible_q(user))
