"""Bearer-token authentication for the API: `Authorization: Bearer pb_...`."""

import hashlib

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions, throttling

from accounts.models import ApiToken
from accounts.permissions import scopes_allowed


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0] not in {"Bearer", "Token"}:
            raise exceptions.AuthenticationFailed("Send the token as 'Authorization: Bearer <token>'.")
        digest = hashlib.sha256(parts[1].encode()).hexdigest()
        token = ApiToken.objects.select_related("user").filter(token_hash=digest).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown API token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API token was revoked.")
        if token.expires_at is not None and token.expires_at <= timezone.now():
            raise exceptions.AuthenticationFailed("This API token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("This user is inactive.")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return self.keyword


def scope_required(scope: str) -> type[permissions.BasePermission]:
    """A DRF permission class that admits only tokens holding `scope`."""

    class HasScope(permissions.BasePermission):
        message = f"This API token lacks the '{scope}' scope."

        def has_permission(self, request, view):
            token = request.auth
            # The user's role is checked again on every call: a trainer moved out of the group
            # loses the scope at once, whatever tokens they minted before.
            return isinstance(token, ApiToken) and scope in token.scopes and scope in scopes_allowed(token.user)

    HasScope.__name__ = f"HasScope_{scope}"
    return HasScope


class TokenRateThrottle(throttling.SimpleRateThrottle):
    """Rate limit per API token (not per user), so one runaway script cannot starve a user's others."""

    scope = "token"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            return self.cache_format % {"scope": self.scope, "ident": f"token-{request.auth.pk}"}
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class FeedbackRateThrottle(TokenRateThrottle):
    """A tighter budget per token for POST /api/v1/feedback, which can retire tasks."""

    scope = "feedback"
