"""Writes for accounts: API tokens."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from accounts.audit import audit_record, roles_change_record
from accounts.audit_changes import acting_as, recorded_elsewhere
from accounts.errors import ServiceError
from accounts.models import ApiToken
from accounts.permissions import ROLES, SCOPE_ROLES, scopes_allowed


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
    with recorded_elsewhere():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=secret[:10],
            token_hash=hashlib.sha256(secret.encode()).hexdigest(),
            scopes=sorted(set(scopes)),
            expires_at=timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None,
        )
    expires = token.expires_at.isoformat() if token.expires_at else None
    detail = {"scopes": token.scopes, "name": name, "expires_at": expires}
    audit_record(actor=user, action="token_create", obj=token, detail=detail)
    return token, secret


def api_token_revoke(*, token: ApiToken, by: AbstractBaseUser | None = None) -> ApiToken:
    """Revoke a token (`by`: who revokes, its owner when not given); revoking twice keeps the first time."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        with recorded_elsewhere():
            token.save(update_fields=["revoked_at"])
        after = {"revoked_at": token.revoked_at.isoformat()}
        detail = {"name": token.name, "before": {"revoked_at": None}, "after": after}
        audit_record(actor=by or token.user, action="token_revoke", obj=token, detail=detail)
    return token


@transaction.atomic
def roles_sync(
    *, user: AbstractBaseUser, roles: set[str], by: AbstractBaseUser | None = None, source: str = ""
) -> None:
    """Make `user`'s roles exactly `roles` (groups outside ROLES are left alone), and take from their API
    tokens every scope the remaining roles no longer allow (a token left with none is revoked). The
    change is recorded in the audit log."""
    from django.contrib.auth.models import Group

    unknown = roles - set(ROLES)
    if unknown:
        raise ServiceError(f"Unknown roles: {', '.join(sorted(unknown))}; roles are {', '.join(ROLES)}.")
    before = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    with recorded_elsewhere():  # one event for the whole change, below
        user.groups.remove(*Group.objects.filter(name__in=before - roles))
        user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in roles - before))
    with acting_as(by):
        roles_change_record(user=user, by=by, before=before, after=roles)
    allowed = set(scopes_allowed(user))
    for token in ApiToken.objects.filter(user=user, revoked_at__isnull=True):
        kept = [scope for scope in token.scopes if scope in allowed]
        if kept == token.scopes:
            continue
        if kept:
            audit_record(
                actor=by,
                action="token_scopes_reduced",
                obj=token,
                detail={"removed": sorted(set(token.scopes) - set(kept)), "source": source},
            )
            token.scopes = kept
            with recorded_elsewhere():
                token.save(update_fields=["scopes"])
        else:
            api_token_revoke(token=token, by=by)
