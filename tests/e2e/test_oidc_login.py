"""Sign-in for organisations against a real OpenID Connect provider (django-oauth-toolkit, started in its
own process with its own key): a new person signs in and gets the roles of their groups claim; a local
account links by email only when the provider says the email is verified; a role removed at the
provider is gone at the next sign-in, with the API token scopes it allowed. Local accounts keep working."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from accounts.models import ApiToken, OidcIdentity
from accounts.permissions import in_group
from accounts.services import api_token_create

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID, CLIENT_SECRET = "passband-test", "secret-for-the-suite-only"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def provider(live_server, tmp_path, settings):
    """The provider's base URL and its claims file (rewrite it to change someone's groups there)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    people = tmp_path / "people.json"
    people.write_text(
        json.dumps(
            {
                "olga": {"email": "olga@example.org", "email_verified": True, "groups": ["reviewers", "trainers"]},
                "dora": {"email": "dora@example.org", "email_verified": False, "groups": ["reviewers"]},
                "bob": {"email": "bob@example.org", "email_verified": True, "groups": ["leads"]},
            }
        )
    )
    port = free_port()
    env = {
        **os.environ,
        "OIDC_PROVIDER_DB": str(tmp_path / "provider.sqlite3"),
        "OIDC_PROVIDER_KEY": key.decode(),
        "OIDC_PROVIDER_PEOPLE": str(people),
        "OIDC_PROVIDER_CLIENT": f"{CLIENT_ID}:{CLIENT_SECRET}",
        "OIDC_PROVIDER_REDIRECT": live_server.url + "/oidc/callback/",
        "OIDC_PROVIDER_PORT": str(port),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.oidc_provider.serve"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == "ready", "the OIDC provider did not start"
        base = f"http://127.0.0.1:{port}/o"
        settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
        settings.OIDC_OP_AUTHORIZATION_ENDPOINT = base + "/authorize/"
        settings.OIDC_OP_TOKEN_ENDPOINT = base + "/token/"
        settings.OIDC_OP_USER_ENDPOINT = base + "/userinfo/"
        settings.OIDC_OP_JWKS_ENDPOINT = base + "/.well-known/jwks.json"
        yield {"people": people}
    finally:
        process.terminate()
        process.wait(timeout=10)


def sign_in_at_provider(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/login/")
    page.click("#oidc-sign-in")
    if page.locator("#provider-login").count():
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", "pw-" + username)
        page.click("#provider-login button")
    page.wait_for_url(lambda url: url.startswith(live_server.url) and "/login/" not in url and "/oidc/" not in url)


def sign_out(page) -> None:
    page.click(".whoami button[type=submit]")
    page.wait_for_url(lambda url: True)


def test_roles_come_from_the_groups_claim_and_follow_the_provider(
    new_context, live_server, provider, sign_in, django_user_model, bob
):
    from django.contrib.auth.models import Group

    page = new_context().new_page()
    sign_in_at_provider(page, live_server, "olga")
    olga = django_user_model.objects.get(username="olga")
    assert OidcIdentity.objects.get(user=olga).subject
    assert set(olga.groups.values_list("name", flat=True)) == {"reviewers", "trainers"}
    assert "Review" in page.locator("nav").inner_text()
    token, _ = api_token_create(user=olga, name="ci", scopes=["read", "export", "verify"])
    sign_out(page)

    # The provider drops trainers from olga's groups: gone at her next sign-in, and so is the export scope.
    people = json.loads(provider["people"].read_text())
    people["olga"]["groups"] = ["reviewers"]
    provider["people"].write_text(json.dumps(people))
    sign_in_at_provider(page, live_server, "olga")
    olga.refresh_from_db()
    assert set(olga.groups.values_list("name", flat=True)) == {"reviewers"}
    assert ApiToken.objects.get(pk=token.pk).scopes == ["read", "verify"]
    sign_out(page)

    # bob (a local reviewer, email verified at the provider) links by email and becomes a lead, not a reviewer.
    Group.objects.get_or_create(name="leads")
    bob.email = "bob@example.org"
    bob.save()
    other = new_context().new_page()
    sign_in_at_provider(other, live_server, "bob")
    bob.refresh_from_db()
    assert OidcIdentity.objects.get(user=bob) and set(bob.groups.values_list("name", flat=True)) == {"leads"}
    assert in_group(bob, "reviewers")  # a lead reviews

    # dora's email is not verified: her local account with that email is not taken over.
    django_user_model.objects.create_user("dora", email="dora@example.org", password="pw-dora")
    third = new_context().new_page()
    sign_in_at_provider(third, live_server, "dora")
    linked = OidcIdentity.objects.get(subject__isnull=False, user__username__startswith="dora-")
    assert linked.user.email == "" and not OidcIdentity.objects.filter(user__username="dora").exists()

    # Local accounts keep signing in with their password.
    local = new_context().new_page()
    sign_in(local, "dora")
    assert "dora" in local.locator(".whoami").inner_text()
