"""Registering OpenEnv servers: the same record, page and command as MCP servers (`protocol`), the
same URL rules, a live check of /schema and a /ws session; an environment given to one is of kind openenv."""

from io import StringIO

import pytest
from django.core.management import call_command

from curation.errors import CurationError
from curation.mcp_servers import client_config, environment_use_mcp_server, mcp_server_register
from curation.models import Environment, McpServer
from curation.tasks import check_remote_server
from engine.episodes.remote_openenv import OpenEnvServerConfig
from tests.support.mcp_kv_server import free_port


@pytest.fixture
def echo_url(openenv_echo_url):
    return openenv_echo_url


@pytest.mark.django_db
def test_registering_checks_the_server_and_keeps_its_step_tool(echo_url, arithmetic):
    server = mcp_server_register(name="echo", url=echo_url, protocol="openenv", reward_tool="grade")
    assert [tool["name"] for tool in server.tools] == ["step"] and server.checked_at is not None
    assert server.tools[0]["parameters"]["required"] == ["message"]
    # The environment gives its rewards itself: no reward tool.
    assert McpServer.objects.get(name="echo").reward_tool == ""
    assert isinstance(client_config(server), OpenEnvServerConfig)
    environment = environment_use_mcp_server(environment=arithmetic, server=server)
    assert environment.kind == Environment.Kind.OPENENV and environment.remote_server == server
    environment_use_mcp_server(environment=environment, server=None)
    assert Environment.objects.get(pk=environment.pk).remote_server is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"url": "http://user:pw@env:8000"}, "url: the URL carries credentials"),
        ({"url": "http://env:8000/?api_key=abc"}, "url: the URL's query carries a secret (api_key=...)"),
        ({"url": "ws://env:8000"}, "url: the URL must start with http:// or https://"),
        ({"stdio": "echo-local"}, "url: an OpenEnv server is reached by its URL"),
        ({"url": "http://env:8000", "protocol": "grpc"}, "protocol: must be one of mcp, openenv"),
    ],
)
def test_fields_are_held_to_the_rules_before_any_connection(fields, problem):
    with pytest.raises(CurationError) as raised:
        mcp_server_register(name="echo", **{"protocol": "openenv", **fields})
    assert str(raised.value).startswith(problem)
    assert not McpServer.objects.exists()


@pytest.mark.django_db
def test_a_server_that_does_not_answer_is_not_registered():
    with pytest.raises(CurationError) as raised:
        mcp_server_register(name="echo", url=f"http://127.0.0.1:{free_port()}", protocol="openenv", timeout_s=5)
    assert str(raised.value).startswith("url: the server did not answer: OpenEnv server echo")
    assert not McpServer.objects.exists()


@pytest.mark.django_db
def test_staff_register_one_on_the_page_and_the_command(client, staff, echo_url, arithmetic):
    client.force_login(staff)
    form = {"name": "echo", "protocol": "openenv", "url": echo_url, "max_sessions": 4, "timeout_s": 10}
    text = client.post("/mcp-servers/", form, follow=True).content.decode()
    assert "Registered echo; a worker is checking it" in text and "OpenEnv server" in text
    assert check_remote_server(McpServer.objects.get(name="echo").pk) == "ok"  # what the worker runs
    assert "<code>step</code>" in client.get("/mcp-servers/").content.decode()
    out = StringIO()
    call_command(
        "add_mcp_server", "echo2", "--protocol", "openenv", "--url", echo_url, "--environment", "arithmetic", stdout=out
    )
    assert "Registered OpenEnv server echo2: step." in out.getvalue()
    assert Environment.objects.get(name="arithmetic").kind == Environment.Kind.OPENENV
