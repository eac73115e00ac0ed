"""Sign-in for organisations: OpenID Connect through mozilla-django-oidc (docs/review.md, "Sign-in").

An identity is the ID token's issuer and subject (OidcIdentity), nothing else: never the email. The ID
token must come from PASSBAND_OIDC_ISSUER for PASSBAND_OIDC_AUDIENCE (its `iss` and `aud`, with its
signature, nonce and expiry), and the userinfo must speak of the same `sub`. An identity seen for the
first time gets a new account; an existing account is linked only when its owner, signed in, asks to
link it (`link_start`) or when an admin adds the identity in the admin. On every sign-in the roles are
re-mapped from the groups claim (PASSBAND_OIDC_ROLE_CLAIMS: claim value -> role; a role the claim no
longer gives is removed, and so are the API token scopes it allowed: accounts.services.roles_sync).

A sign-in that fails says why: `SignInRefused` carries a sentence the callback page shows.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import jwt
import requests
from django.conf import settings
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts.models import OidcIdentity
from accounts.permissions import ROLES
from accounts.services import roles_sync

logger = logging.getLogger(__name__)

# Where a signed-in person's request to link their account waits for the provider's answer (the session).
LINK_SESSION_KEY = "passband_oidc_link"
LINK_SECONDS = 600


class SignInRefused(Exception):
    """A sign-in refused for a reason the person can be told (the callback page shows the message). Not a
    SuspiciousOperation, which the library swallows into a failure without a reason."""


def roles_from_claims(claims: dict[str, Any]) -> set[str]:
    """The Passband roles the claims' groups map to (PASSBAND_OIDC_ROLE_CLAIMS; by default a group named
    like a role is that role)."""
    mapping = settings.PASSBAND_OIDC_ROLE_CLAIMS or {role: role for role in ROLES}
    groups = claims.get(settings.PASSBAND_OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    return {mapping[group] for group in groups if isinstance(group, str) and group in mapping}


def link_start(request) -> None:
    """Note that the signed-in person asks to link their account to the identity they sign in with next
    (within LINK_SECONDS, in this session)."""
    request.session[LINK_SESSION_KEY] = {"user": request.user.pk, "until": time.time() + LINK_SECONDS}


def expected_audience() -> str:
    return settings.PASSBAND_OIDC_AUDIENCE or settings.OIDC_RP_CLIENT_ID


class PassbandOIDCBackend(OIDCAuthenticationBackend):
    def authenticate(self, request, **kwargs):
        """mozilla-django-oidc's code flow; a provider that refuses the code (used already, expired) or
        does not answer in OIDC_TIMEOUT seconds is a SignInRefused saying so."""
        try:
            return super().authenticate(request, **kwargs)
        except requests.HTTPError as error:
            logger.warning("OIDC provider refused the sign-in: %s", error)
            answer = error.response
            if answer is not None and answer.url.startswith(self.OIDC_OP_TOKEN_ENDPOINT):
                raise SignInRefused(
                    "The identity provider refused the sign-in code (it was used already or has expired)."
                ) from None
            status = answer.status_code if answer is not None else "no answer"
            raise SignInRefused(f"The identity provider answered with an error (HTTP {status}).") from None
        except requests.RequestException as error:
            logger.warning("OIDC provider unreachable: %s", error)
            raise SignInRefused(
                f"The identity provider did not answer within {settings.OIDC_TIMEOUT:g} s; try again later."
            ) from None

    def _verify_jws(self, payload, key):
        """The token's signature, expiry, issuer and audience (the library checks neither of the last two)."""
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            algorithm = header.get("alg")
            raise SignInRefused(f"The identity provider signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO}.")
        audience = expected_audience()
        try:
            claims = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=audience,
                issuer=settings.PASSBAND_OIDC_ISSUER,
                options={"require": ["iss", "aud", "sub", "exp", "iat"]},
                leeway=30,
            )
        except jwt.InvalidIssuerError:
            raise SignInRefused("The ID token was issued by another provider than this site trusts.") from None
        except jwt.InvalidAudienceError:
            raise SignInRefused("The ID token was issued for another application than this site.") from None
        except jwt.PyJWTError as error:
            raise SignInRefused(f"The ID token is not valid: {error}.") from None
        listed = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(listed) > 1 and claims.get("azp") != audience:
            raise SignInRefused("The ID token was issued for another application than this site.")
        return claims

    def get_userinfo(self, access_token, id_token, payload):
        """The userinfo claims, which must name the ID token's subject; `iss` is the ID token's."""
        claims = super().get_userinfo(access_token, id_token, payload)
        if claims.get("sub") != payload["sub"]:
            raise SignInRefused("The identity provider's userinfo names another person than its ID token.")
        return {**claims, "iss": payload["iss"]}

    def verify_claims(self, claims) -> bool:
        return isinstance(claims.get("sub"), str) and bool(claims["sub"]) and len(claims["sub"]) <= 255

    def filter_users_by_claims(self, claims):
        """The account linked to this issuer and subject; or, when its signed-in owner asked to link it,
        their own account (linked in update_user). Never an account found by email."""
        wanted = self._link_requested()
        if wanted is not None:
            return self.UserModel.objects.filter(pk=wanted.pk)
        return self.UserModel.objects.filter(oidc_identity__issuer=claims["iss"], oidc_identity__subject=claims["sub"])

    def _link_requested(self):
        pending = self.request.session.pop(LINK_SESSION_KEY, None)
        user = getattr(self.request, "user", None)
        if not pending or user is None or not user.is_authenticated:
            return None
        if pending.get("user") != user.pk or pending.get("until", 0) < time.time():
            return None
        return user

    def get_username(self, claims) -> str:
        wanted = (claims.get("preferred_username") or claims["sub"])[:140]
        candidate, number = wanted, 1
        while self.UserModel.objects.filter(username=candidate).exists():
            number += 1
            candidate = f"{wanted}-{number}"
        return candidate

    @transaction.atomic
    def create_user(self, claims):
        """A new account for an identity seen for the first time: never staff, never linked by email."""
        email = claims.get("email") if claims.get("email_verified") is True else ""
        email = email if isinstance(email, str) else ""
        user = self.UserModel.objects.create_user(self.get_username(claims), email=email)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        return self.update_user(user, claims)

    @transaction.atomic
    def update_user(self, user, claims):
        identity = OidcIdentity.objects.filter(issuer=claims["iss"], subject=claims["sub"]).first()
        if identity is None:
            if OidcIdentity.objects.filter(user=user).exists():
                raise SignInRefused(
                    "Your account is already linked to another organisation identity; an admin can change it."
                )
            identity = OidcIdentity.objects.create(user=user, issuer=claims["iss"], subject=claims["sub"])
        elif identity.user_id != user.pk:
            raise SignInRefused("This organisation identity is linked to another account already.")
        identity.save(update_fields=["last_login_at"])
        roles_sync(user=user, roles=roles_from_claims(claims), source="oidc")
        return user
