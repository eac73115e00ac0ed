"""Template filters for role-dependent navigation: {% load roles %}{% if user|has_role:"reviewers" %}."""

from django import template

from accounts.permissions import in_group

register = template.Library()


@register.filter
def has_role(user, group: str) -> bool:
    """Staff, or a member of the named group (authors, reviewers, trainers)."""
    return in_group(user, group)
