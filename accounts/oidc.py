"""Sign-in for organisations: OpenID Connect through mozilla-django-oidc (docs/review.md, "Sign-in").

The provider's `sub` links to one Passband user (OidcIdentity). A first sign-in links to an existing
local account by email only when the provider says `email_verified` is true; otherwise it creates a
new account. On every sign-in the roles are re-mapped from the groups claim (PASSBAND_OIDC_ROLE_CLAIMS:
claim value -> role; a role the claim no longer gives is removed, and so are the API token scopes it
allowed: accounts.services.roles_sync). Local accounts keep signing in with their password.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts.models import OidcIdentity
from accounts.permissions import ROLES
from accounts.services import roles_sync

logger = logging.getLogger(__name__)


def roles_from_claims(claims: dict[str, Any]) -> set[str]:
    """The Passband roles the claims' groups map to (PASSBAND_OIDC_ROLE_CLAIMS; by default a group named
    like a role is that role)."""
    mapping = settings.PASSBAND_OIDC_ROLE_CLAIMS or {role: role for role in ROLES}
    groups = claims.get(settings.PASSBAND_OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    return {mapping[group] for group in groups if group in mapping}


class PassbandOIDCBackend(OIDCAuthenticationBackend):
    def verify_claims(self, claims) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims):
        linked = self.UserModel.objects.filter(oidc_identity__subject=claims["sub"])
        if linked.exists():
            return linked
        email = (claims.get("email") or "").strip()
        if email and claims.get("email_verified") is True:
            return self.UserModel.objects.filter(email__iexact=email, oidc_identity__isnull=True)
        return self.UserModel.objects.none()

    def get_username(self, claims) -> str:
        wanted = (claims.get("preferred_username") or claims["sub"])[:140]
        taken = self.UserModel.objects.filter(username=wanted).exists()
        return f"{wanted}-{claims['sub'][:8]}" if taken else wanted

    @transaction.atomic
    def create_user(self, claims):
        email = claims.get("email", "") if claims.get("email_verified") is True else ""
        user = self.UserModel.objects.create_user(self.get_username(claims), email=email)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        return self.update_user(user, claims)

    @transaction.atomic
    def update_user(self, user, claims):
        OidcIdentity.objects.update_or_create(user=user, defaults={"subject": claims["sub"]})
        roles_sync(user=user, roles=roles_from_claims(claims), source="oidc")
        return user
