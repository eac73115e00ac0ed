"""Registering an outside server (MCP or OpenEnv) as an attacker with a staff account would: the
server's own secrets as its token, a declared secret pointed at another origin, the metadata service
and loopback in every spelling. Each is refused with a message naming the field, nothing is saved,
and the stand-in listener sees no connection. The check itself runs in a worker (the command runs it
in process); the page shows its answer."""

import pytest

from curation.errors import CurationError
from curation.mcp_servers import client_config, mcp_server_register
from curation.models import McpServer
from curation.tasks import check_remote_server
from tests.support.hostile_servers import MetadataListener
from tests.support.outbound import outbound_policy

FORM = {"name": "tools", "max_sessions": 4, "timeout_s": 10, "reward_tool": "grade"}


@pytest.fixture
def metadata():
    with MetadataListener() as listener:
        yield listener


@pytest.mark.django_db
@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "UNDECLARED_TOKEN"])
@pytest.mark.parametrize("protocol", ["mcp", "openenv"])
def test_the_server_own_secrets_are_never_a_bearer_token(client, staff, metadata, variable, protocol):
    client.force_login(staff)
    form = {**FORM, "protocol": protocol, "url": f"{metadata.url}/mcp", "api_key_env": variable}
    response = client.post("/mcp-servers/", form)
    assert response.status_code == 200
    assert f"api key env: &#x27;{variable}&#x27; is not a declared outbound secret" in response.content.decode()
    with pytest.raises(CurationError, match="not a declared outbound secret"):
        mcp_server_register(name="tools", url=metadata.url, protocol=protocol, api_key_env=variable)
    assert not McpServer.objects.exists()
    assert metadata.connections == 0


@pytest.mark.django_db
def test_a_declared_secret_is_bound_to_its_origin(metadata, monkeypatch):
    monkeypatch.setenv("TOOLS_TOKEN", "tools-secret")
    with outbound_policy(secrets={"TOOLS_TOKEN": ["https://tools.example.com"]}):
        with pytest.raises(CurationError, match="TOOLS_TOKEN may be sent only to https://tools.example.com:443"):
            mcp_server_register(name="tools", url=f"{metadata.url}/mcp", api_key_env="TOOLS_TOKEN", check=False)
        server = mcp_server_register(
            name="tools", url="https://tools.example.com/mcp", api_key_env="TOOLS_TOKEN", check=False
        )
        assert client_config(server).headers == {"Authorization": "Bearer tools-secret"}
    assert McpServer.objects.count() == 1 and metadata.connections == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "host",
    [
        "2130706433",
        "0x7f000001",
        "[::ffff:127.0.0.1]",
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
        "localhost",
        "169.254.169.254",
    ],
)
def test_the_page_refuses_loopback_and_metadata_addresses_in_every_form(client, staff, metadata, host):
    client.force_login(staff)
    response = client.post("/mcp-servers/", {**FORM, "url": f"http://{host}:{metadata.port}/mcp"})
    assert response.status_code == 200 and "is refused" in response.content.decode()
    assert not McpServer.objects.exists()
    assert metadata.connections == 0


@pytest.mark.django_db
def test_a_check_the_policy_refuses_is_shown_on_the_page(client, staff, metadata):
    # Registered while the operator allowed the host; the allowance withdrawn, the worker's check is refused.
    server = mcp_server_register(name="tools", url=f"{metadata.url}/mcp", check=False)
    with outbound_policy(allowed_hosts=""):
        assert check_remote_server(server.pk) == "failed"
    server.refresh_from_db()
    assert server.check_status == "failed" and "refused by the outbound policy" in server.check_error
    client.force_login(staff)
    page = client.get("/mcp-servers/").content.decode()
    assert "Check failed: url: refused by the outbound policy" in page
    assert metadata.connections == 0
