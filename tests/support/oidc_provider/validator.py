"""The provider's claims about each person, read from a JSON file on every request, so a test changes a
person's groups "at the provider" by rewriting it: {"username": {"email", "email_verified", "groups"}}.
A person with "userinfo_sub" is a provider fault: its userinfo names that subject, not the ID token's."""

import json
import os
from pathlib import Path

from oauth2_provider.oauth2_validators import OAuth2Validator


class PeopleValidator(OAuth2Validator):
    oidc_claim_scope = None  # every claim below, whatever scopes were asked

    def get_userinfo_claims(self, request):
        claims = super().get_userinfo_claims(request)
        claims["sub"] = _person(request).get("userinfo_sub", claims["sub"])
        return claims

    def get_additional_claims(self, request):
        person = _person(request)
        return {
            "preferred_username": request.user.username,
            "email": person["email"],
            "email_verified": person["email_verified"],
            "groups": person["groups"],
        }


def _person(request) -> dict:
    return json.loads(Path(os.environ["OIDC_PROVIDER_PEOPLE"]).read_text())[request.user.username]
