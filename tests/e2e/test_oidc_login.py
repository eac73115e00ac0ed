"""Sign-in for organisations against a real OpenID Connect provider (django-oauth-toolkit, started in its
own process with its own key), in a real browser: a new person signs in and gets the roles of their groups
claim; a role removed at the provider is gone at the next sign-in, with the API token scopes it allowed; a
local account is never taken over by an identity with its email, and is linked only by its owner's own
step on the tokens page. Local accounts keep working."""

import json
from urllib.parse import urlsplit

import pytest

from accounts.models import ApiToken, OidcIdentity
from accounts.permissions import in_group
from accounts.services import api_token_create
from tests.support.oidc_provider.process import point_passband_at, provider_running

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def provider(live_server, tmp_path, settings):
    """The provider's claims file (rewrite it to change someone's groups there)."""
    people = {
        "olga": {"email": "olga@example.org", "email_verified": True, "groups": ["reviewers", "trainers"]},
        "dora": {"email": "dora@example.org", "email_verified": False, "groups": ["reviewers"]},
        "bob": {"email": "bob@example.org", "email_verified": True, "groups": ["leads"]},
    }
    with provider_running(
        folder=tmp_path, people=people, redirect_uris=[live_server.url + "/oidc/callback/"]
    ) as issuer:
        point_passband_at(settings, issuer)
        yield {"people": tmp_path / "people.json", "issuer": issuer}


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
    new_context, live_server, provider, sign_in, django_user_model, bob, allow_console_errors
):
    # The test provider's own pages (django-oauth-toolkit's side, not Passband's) log a 404 in chromium.
    issuer = urlsplit(provider["issuer"])
    allow_console_errors.append(f"{issuer.scheme}://{issuer.netloc}/")
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

    # bob (a local reviewer, the same email verified at the provider) is not taken over: his organisation
    # identity gets an account of its own.
    Group.objects.get_or_create(name="leads")
    bob.email = "bob@example.org"
    bob.save()
    other = new_context().new_page()
    sign_in_at_provider(other, live_server, "bob")
    assert "bob-2" in other.locator(".whoami").inner_text()
    assert not OidcIdentity.objects.filter(user=bob).exists()
    OidcIdentity.objects.filter(user__username="bob-2").delete()
    sign_out(other)

    # bob links his own account, signed in with his password, on the tokens page: then his organisation
    # sign-in is bob, a lead now (his groups claim), not a reviewer.
    sign_in(other, "bob")
    other.goto(live_server.url + "/tokens/")
    other.click("#oidc-link")
    other.click("#oidc-continue")
    other.wait_for_url(lambda url: url.startswith(live_server.url + "/tokens/"))
    assert OidcIdentity.objects.filter(user=bob).exists()
    sign_out(other)
    sign_in_at_provider(other, live_server, "bob")
    assert "bob" in other.locator(".whoami").inner_text() and "bob-2" not in other.locator(".whoami").inner_text()
    bob.refresh_from_db()
    assert set(bob.groups.values_list("name", flat=True)) == {"leads"}
    assert in_group(bob, "reviewers")  # a lead reviews

    # dora's local account keeps its own: her organisation identity is another account.
    django_user_model.objects.create_user("dora", email="dora@example.org", password="pw-dora")
    third = new_context().new_page()
    sign_in_at_provider(third, live_server, "dora")
    linked = OidcIdentity.objects.get(user__username__startswith="dora-")
    assert linked.user.email == "" and not OidcIdentity.objects.filter(user__username="dora").exists()

    # Local accounts keep signing in with their password.
    local = new_context().new_page()
    sign_in(local, "dora")
    assert "dora" in local.locator(".whoami").inner_text()
