"""Sign-in for organisations against the real provider (django-oauth-toolkit in its own process, its own
key), driven over HTTP: an identity is its issuer and subject, never an email; the ID token's issuer and
audience and the userinfo's subject are checked; a replayed, forged or unanswered code is the sign-in error
page; an existing account is linked only by its signed-in owner's explicit step (or in the admin).

root is a local superuser; olga, mallory and bob are people at the provider.
"""

import socket
import threading
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

from accounts.models import AuditEvent, OidcIdentity
from tests.support.oidc_provider.process import point_passband_at, provider_running

pytestmark = pytest.mark.django_db
CALLBACK = "http://testserver/oidc/callback/"
PEOPLE = {
    "olga": {"email": "olga@example.org", "email_verified": True, "groups": ["reviewers"]},
    # mallory controls her email at the provider and sets it to the local superuser's, "verified"
    "mallory": {"email": "root@example.org", "email_verified": True, "groups": ["leads"]},
    "bob": {"email": "bob@example.org", "email_verified": True, "groups": ["authors"]},
    "eve": {"email": "eve@example.org", "email_verified": True, "groups": [], "userinfo_sub": "1"},
}


@pytest.fixture(scope="module")
def provider_process(tmp_path_factory):
    """One provider for the module (starting one takes seconds); each test signs in afresh."""
    with provider_running(folder=tmp_path_factory.mktemp("oidc"), people=PEOPLE, redirect_uris=[CALLBACK]) as issuer:
        yield issuer


@pytest.fixture
def provider(provider_process, settings):
    return point_passband_at(settings, provider_process)


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", email="root@example.org", password="pw-root")


def provider_answer(client, username: str) -> str:
    """Start at Passband, sign in at the provider as `username`, and return the callback path with the
    provider's code and state, not yet followed."""
    authorize = client.get("/oidc/authenticate/")["Location"]
    browser = requests.Session()
    login = urljoin(authorize, browser.get(authorize, allow_redirects=False, timeout=10).headers["Location"])
    browser.get(login, timeout=10)
    answer = browser.post(
        login,
        data={
            "username": username,
            "password": "pw-" + username,
            "csrfmiddlewaretoken": browser.cookies["provider_csrftoken"],
            "next": parse_qs(urlsplit(login).query)["next"][0],
        },
        allow_redirects=False,
        timeout=10,
    )
    callback = browser.get(urljoin(login, answer.headers["Location"]), allow_redirects=False, timeout=10).headers[
        "Location"
    ]
    assert callback.startswith(CALLBACK), callback
    return callback.removeprefix("http://testserver")


def signed_in_as(client):
    return client.get("/tokens/").context["user"] if client.get("/tokens/").status_code == 200 else None


def refused(response, reason: str) -> bool:
    page = response.content.decode()
    return response.status_code == 400 and "Sign-in with your organisation failed" in page and reason in page


def test_a_verified_email_equal_to_a_superuser_s_never_links_to_that_account(client, provider, root):
    response = client.get(provider_answer(client, "mallory"))
    assert response.status_code == 302
    mallory = signed_in_as(client)
    assert mallory.username == "mallory" and mallory.pk != root.pk
    assert not mallory.is_staff and not mallory.is_superuser and not mallory.has_usable_password()
    assert set(mallory.groups.values_list("name", flat=True)) == {"leads"}
    identity = OidcIdentity.objects.get(user=mallory)
    assert (identity.issuer, identity.subject) == (provider, identity.subject) and identity.subject
    assert not OidcIdentity.objects.filter(user=root).exists()


def test_an_identity_is_its_issuer_and_subject(client, provider, django_user_model, root):
    first = client.get(provider_answer(client, "olga"))
    assert first.status_code == 302
    olga = signed_in_as(client)
    subject = OidcIdentity.objects.get(user=olga).subject
    # The same subject at another issuer is another person: root's link there does not make olga root.
    OidcIdentity.objects.filter(user=olga).update(issuer="https://other-provider.example")
    client.logout()
    assert client.get(provider_answer(client, "olga")).status_code == 302
    again = signed_in_as(client)
    assert again.pk != olga.pk and again.username == "olga-2"
    assert OidcIdentity.objects.get(user=again).subject == subject


@pytest.mark.parametrize(
    ("setting", "value", "reason"),
    [
        ("PASSBAND_OIDC_ISSUER", "https://login.example.org", "issued by another provider"),
        ("PASSBAND_OIDC_AUDIENCE", "another-client", "issued for another application"),
    ],
)
def test_an_id_token_from_another_issuer_or_for_another_audience_is_refused(
    client, provider, settings, django_user_model, setting, value, reason
):
    callback = provider_answer(client, "olga")
    setattr(settings, setting, value)
    response = client.get(callback)
    assert refused(response, reason)
    assert signed_in_as(client) is None and not django_user_model.objects.filter(username="olga").exists()


def test_a_userinfo_naming_another_subject_than_the_id_token_is_refused(client, provider, django_user_model):
    response = client.get(provider_answer(client, "eve"))
    assert refused(response, "userinfo names another person than its ID token")
    assert signed_in_as(client) is None and not OidcIdentity.objects.exists()


def test_a_replayed_or_forged_code_is_the_sign_in_error_page(client, provider):
    callback = provider_answer(client, "olga")
    assert client.get(callback).status_code == 302
    client.logout()
    assert refused(client.get(callback), "could not be completed")  # replayed: its state is spent
    forged = provider_answer(client, "olga")
    code = parse_qs(urlsplit(forged).query)["code"][0]
    assert refused(client.get(forged.replace(code, "forged-" + code)), "refused the sign-in code")
    assert refused(client.get("/oidc/callback/?code=x&state=y"), "could not be completed")
    assert signed_in_as(client) is None


@pytest.fixture
def stalling_listener():
    """A real listener that accepts connections and never answers: an identity provider gone quiet."""
    server = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def hold():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/token/"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def test_a_provider_that_does_not_answer_is_the_sign_in_error_page(client, provider, settings, stalling_listener):
    callback = provider_answer(client, "olga")
    settings.OIDC_OP_TOKEN_ENDPOINT, settings.OIDC_TIMEOUT = stalling_listener, 1
    assert refused(client.get(callback), "did not answer within 1 s")


def test_an_owner_links_their_own_account_explicitly(client, provider, root, django_user_model):
    client.force_login(root)
    assert client.post("/oidc/link/")["Location"] == "/tokens/"
    assert 'id="oidc-continue"' in client.get("/tokens/").content.decode()
    callback = provider_answer(client, "mallory")
    assert client.get(callback).status_code == 302
    identity = OidcIdentity.objects.get(user=root)
    assert identity.issuer == provider
    client.logout()
    assert client.get(provider_answer(client, "mallory")).status_code == 302
    assert signed_in_as(client).pk == root.pk
    assert not django_user_model.objects.filter(username__startswith="mallory").exists()


def test_an_identity_linked_to_one_account_cannot_be_linked_to_another(client, provider, root, bob):
    assert client.get(provider_answer(client, "olga")).status_code == 302
    client.logout()
    client.force_login(bob)
    client.post("/oidc/link/")
    callback = provider_answer(client, "olga")
    assert refused(client.get(callback), "linked to another account already")
    assert not OidcIdentity.objects.filter(user=bob).exists()


def test_a_link_request_is_the_signed_in_owner_s_and_needs_them(client, provider, root):
    assert client.post("/oidc/link/").status_code == 302  # signed out: to the sign-in page, nothing noted
    assert "/login/" in client.post("/oidc/link/")["Location"]
    assert client.get(provider_answer(client, "mallory")).status_code == 302
    assert signed_in_as(client).username == "mallory" and not OidcIdentity.objects.filter(user=root).exists()


def test_an_admin_links_an_account_in_the_admin_and_it_is_recorded(client, provider, root, bob):
    client.force_login(root)
    response = client.post("/admin/accounts/oidcidentity/add/", {"user": bob.pk, "issuer": provider, "subject": "3"})
    assert response.status_code == 302, response.content.decode()[:1000]
    event = AuditEvent.objects.get(action="oidcidentity_create")
    assert event.actor == root and event.detail["after"]["subject"] == "3" and event.detail["via"] == "admin"
