"""`make run` runs with DEBUG=1: Django's debug pages (tracebacks, settings, URL patterns) go to
loopback clients only, and the server listens on loopback unless PASSBAND_BIND opts in."""

from pathlib import Path

import pytest
from django.urls import path

from passband.urls import urlpatterns as passband_urls

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def boom(request):
    raise RuntimeError("secret-laden traceback")


urlpatterns = [path("boom/", boom), *passband_urls]


@pytest.fixture
def debug_client(client, settings):
    settings.DEBUG = True
    client.raise_request_exception = False
    return client


@pytest.mark.urls(__name__)
def test_a_remote_client_never_sees_the_technical_500_page(debug_client):
    remote = debug_client.get("/boom/", REMOTE_ADDR="192.0.2.7")
    assert remote.status_code == 500 and b"secret-laden traceback" not in remote.content
    assert b"Traceback" not in remote.content
    local = debug_client.get("/boom/", REMOTE_ADDR="127.0.0.1")
    assert local.status_code == 500 and b"secret-laden traceback" in local.content


def test_only_staff_on_loopback_see_the_technical_404_page(debug_client, alice, staff):
    remote = debug_client.get("/no-such-page/", REMOTE_ADDR="192.0.2.7")
    assert remote.status_code == 404 and b"URLconf" not in remote.content
    assert b'id="error-page"' in remote.content  # the site's own page, with its navigation
    local = debug_client.get("/no-such-page/", REMOTE_ADDR="::1")
    assert local.status_code == 404 and b"URLconf" not in local.content  # signed out, on make run's machine
    debug_client.force_login(alice)
    author = debug_client.get("/no-such-page/", REMOTE_ADDR="::1")
    assert author.status_code == 404 and b"URLconf" not in author.content and b"Not found" in author.content
    debug_client.force_login(staff)
    local = debug_client.get("/no-such-page/", REMOTE_ADDR="::1")
    assert local.status_code == 404 and b"URLconf" in local.content


def test_a_refusal_is_the_site_page_with_its_reason(client, charlie, arithmetic):
    client.force_login(charlie)  # a trainer: the campaign list is for browser roles
    response = client.get("/campaigns/")
    assert response.status_code == 403
    page = response.content.decode()
    assert 'id="error-page"' in page and "Signed in as charlie" in page and "Not allowed" in page


def test_make_run_listens_on_loopback_unless_told_otherwise():
    script = (ROOT / "scripts" / "run-local.sh").read_text()
    assert "BIND=${PASSBAND_BIND:-127.0.0.1}" in script and 'runserver "$BIND:$PORT"' in script
    assert "0.0.0.0:" not in script
