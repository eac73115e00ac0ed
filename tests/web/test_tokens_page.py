"""The token page: alice lists, creates (secret shown once) and revokes her tokens; bob cannot touch hers."""

import pytest
from django.core.management import call_command

from accounts.models import ApiToken
from accounts.services import api_token_create

pytestmark = pytest.mark.django_db


def test_create_shows_the_secret_once_and_it_works(client, charlie):
    client.force_login(charlie)
    response = client.post("/tokens/", {"name": "laptop", "scopes": ["read", "export"], "expires_in_days": "30"})
    secret = response.context["secret"]
    assert secret.startswith("pb_") and secret in response.content.decode()
    token = ApiToken.objects.get(user=charlie)
    assert token.scopes == ["export", "read"] and token.token_hash != secret
    again = client.get("/tokens/").content.decode()
    assert secret not in again and token.prefix in again
    assert client.get("/api/v1/tasks", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200


def test_bad_input_says_what_to_fix(client, alice):
    client.force_login(alice)
    page = client.post("/tokens/", {"name": "x", "scopes": ["admin"]}, follow=True).content.decode()
    assert "Scopes must be some of" in page and not ApiToken.objects.exists()
    page = client.post("/tokens/", {"name": "", "scopes": ["read"]}, follow=True).content.decode()
    assert "Name:" in page and not ApiToken.objects.exists()


def test_revoke_own_token_only(client, alice, bob):
    token, secret = api_token_create(user=alice, name="t", scopes=["read"])
    client.force_login(bob)
    assert client.post(f"/tokens/{token.pk}/revoke/").status_code == 404
    client.force_login(alice)
    client.post(f"/tokens/{token.pk}/revoke/")
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert client.get("/api/v1/tasks", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401


def test_page_needs_sign_in(client):
    assert client.get("/tokens/").status_code == 302


def test_command_revokes_by_prefix(alice, capsys):
    token, _ = api_token_create(user=alice, name="cli", scopes=["read"])
    call_command("create_api_token", "alice", "--revoke", token.prefix)
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_the_form_offers_only_the_scopes_of_the_users_role(client, alice, charlie):
    client.force_login(alice)
    assert client.get("/tokens/").context["scopes"] == ["read", "curate"]
    page = client.post("/tokens/", {"name": "x", "scopes": ["read", "feedback"]}, follow=True).content.decode()
    assert "may not hold feedback" in page and not ApiToken.objects.exists()
    client.force_login(charlie)
    assert client.get("/tokens/").context["scopes"] == ["read", "export", "feedback", "verify"]
