"""The OpenAPI schema: served at /api/schema/, documented at /api/docs/ without a CDN, and
schemathesis, sending generated requests to every operation, finds no server error."""

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import override_settings
from hypothesis import HealthCheck, Phase, settings

from accounts.services import api_token_create
from tests.releases.export_data import calibrated_environment

# Schemathesis calls the app in process as host "localhost"; test settings allow only "testserver".
with override_settings(ALLOWED_HOSTS=["localhost"]):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@pytest.fixture
def keep_test_connection():
    """Like Django's test client: requests must not close the connection that holds the test transaction."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def every_scope(keep_test_connection, db, charlie, arithmetic, alice, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.ALLOWED_HOSTS = ["localhost", "testserver"]
    calibrated_environment(arithmetic, alice)
    return api_token_create(user=charlie, name="fuzz", scopes=["read", "export", "feedback", "verify"])[1]


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_operation_answers_with_a_server_error(case, every_scope):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {every_scope}"}, checks=[schemathesis.checks.not_a_server_error]
    )


def test_schema_and_docs_are_served_offline(client):
    body = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert body["openapi"].startswith("3.")
    assert {"/api/v1/tasks", "/api/v1/releases", "/api/v1/releases/{release_id}"} <= set(body["paths"])
    assert body["components"]["securitySchemes"]["apiToken"]["scheme"] == "bearer"
    page = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page and "cdn" not in page.lower() and "//unpkg" not in page
