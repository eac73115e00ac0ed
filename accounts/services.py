"""Writes for accounts: API tokens."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from accounts.audit import audit_record
from accounts.errors import ServiceError
from accounts.models import ApiToken
from accounts.permissions import SCOPE_ROLES, scopes_allowed


def api_token_create(
    *, user: AbstractBaseUser, name: str, scopes: list[str], expires_in_days: int | None = 90
) -> tuple[ApiToken, str]:
    """Create an API token. Returns the record and the secret, which is never stored or shown again."""
    unknown = set(scopes) - set(ApiToken.SCOPES)
    if unknown or not scopes:
        raise ServiceError(f"Scopes must be some of {', '.join(ApiToken.SCOPES)}; got {', '.join(scopes) or 'none'}.")
    allowed = scopes_allowed(user)
    refused = sorted(set(scopes) - set(allowed))
    if refused:
        who = ", ".join(f"{scope} ({' or '.join(SCOPE_ROLES[scope] or ())} and staff)" for scope in refused)
        raise ServiceError(f"Scopes: your role may not hold {who}. You may choose: {', '.join(allowed) or 'none'}.")
    secret = "pb_" + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[:10],
        token_hash=hashlib.sha256(secret.encode()).hexdigest(),
        scopes=sorted(set(scopes)),
        expires_at=timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None,
    )
    audit_record(actor=user, action="token_create", obj=token, detail={"scopes": token.scopes, "name": name})
    return token, secret


def api_token_revoke(*, token: ApiToken, by: AbstractBaseUser | None = None) -> ApiToken:
    """Revoke a token (`by`: who revokes, its owner when not given); revoking twice keeps the first time."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=by or token.user, action="token_revoke", obj=token, detail={"name": token.name})
    return token
