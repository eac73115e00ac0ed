"""Template filters for role-dependent navigation: {% load roles %}{% if user|has_role:"reviewers" %}."""

from django import template
from django.conf import settings

from accounts.permissions import in_group

register = template.Library()


@register.simple_tag
def oidc_enabled() -> bool:
    """Whether sign-in through the organisation's OpenID Connect provider is configured."""
    return bool(settings.OIDC_RP_CLIENT_ID and settings.OIDC_OP_AUTHORIZATION_ENDPOINT)


@register.filter
def has_role(user, group: str) -> bool:
    """Staff, or a member of the named group (authors, reviewers, trainers)."""
    return in_group(user, group)
