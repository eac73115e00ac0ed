"""Registering MCP servers (URL rules, a live check, invalid schemas, stdio from settings only), the
staff page and command, and the session cap per server (Redis, and per process without it)."""

import sys
import threading
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from curation.errors import CurationError
from curation.mcp_servers import client_config, mcp_server_register, session_slot, sessions_in_use
from curation.models import Environment, McpServer
from curation.tasks import check_remote_server
from engine.episodes.remote_mcp import McpUnavailable
from tests.support.mcp_kv_server import free_port, serve_mcp_kv
from tests.support.outbound import outbound_policy

SERVER_SCRIPT = str(Path(__file__).resolve().parents[1] / "support" / "mcp_kv_server.py")
KV_TOOLS = {"add": False, "multiply": False, "put": False, "get": False, "grade": True}


@pytest.fixture
def kv_url(mcp_kv_url):
    return mcp_kv_url


@pytest.mark.django_db
def test_registering_checks_the_server_and_keeps_its_tools(kv_url):
    server = mcp_server_register(name="kv", url=kv_url)
    assert {tool["name"]: tool["hidden"] for tool in server.tools} == KV_TOOLS
    assert server.checked_at is not None
    stored = McpServer.objects.get(name="kv")
    add = next(tool for tool in stored.tools if tool["name"] == "add")
    assert add["parameters"]["required"] == ["a", "b"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://tools/mcp", "url: the URL must start with http:// or https://"),
        ("http://user:pw@tools/mcp", "url: the URL carries credentials"),
        ("http://tools/mcp?token=abc", "url: the URL's query carries a secret (token=...)"),
        ("http:///mcp", "has no host"),
    ],
)
def test_urls_are_held_to_the_outbound_rules_before_any_connection(url, problem):
    with pytest.raises(CurationError) as raised:
        mcp_server_register(name="kv", url=url)
    assert problem in str(raised.value)
    assert not McpServer.objects.exists()


@pytest.mark.django_db
def test_a_server_that_does_not_answer_is_not_registered():
    with pytest.raises(CurationError) as raised:
        mcp_server_register(name="kv", url=f"http://127.0.0.1:{free_port()}/mcp", timeout_s=5)
    assert str(raised.value).startswith("url: the server did not answer: MCP server kv")
    assert not McpServer.objects.exists()


@pytest.mark.django_db
def test_an_invalid_input_schema_is_a_clear_registration_error():
    with serve_mcp_kv(bad_schema=True) as url, pytest.raises(CurationError) as raised:
        mcp_server_register(name="kv", url=url)
    assert str(raised.value) == (
        "tools: tool broken: inputSchema is not a valid JSON Schema at properties/x/type: 'integer-ish' is not "
        "valid under any of the given schemas. Fix the tool's inputSchema on the server, then check again."
    )
    assert not McpServer.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({}, "url: give the server's streamable HTTP URL, or the name of a stdio server"),
        ({"url": "http://tools/mcp", "stdio": "kv"}, "url: give the server's streamable HTTP URL, or the name"),
        ({"url": "http://tools/mcp", "max_sessions": 0}, "max sessions: must lie between 1 and 1024"),
        ({"url": "http://tools/mcp", "timeout_s": 0}, "timeout: must lie between 0 and 600"),
        (
            {"url": "http://tools/mcp", "api_key_env": "MY KEY"},
            "api key env: 'MY KEY' is not a declared outbound secret",
        ),
        ({"stdio": "python -m tools"}, "stdio: 'python -m tools' is not in PASSBAND_MCP_STDIO_SERVERS"),
    ],
)
def test_fields_are_checked_with_a_message_naming_them(fields, problem):
    with pytest.raises(CurationError) as raised:
        mcp_server_register(name="kv", **fields)
    assert str(raised.value).startswith(problem)


@pytest.mark.django_db
def test_a_stdio_server_is_a_command_in_settings_only(settings):
    settings.PASSBAND_MCP_STDIO_SERVERS = {
        "kv-local": {"command": [sys.executable, SERVER_SCRIPT, "--stdio"], "env": {}}
    }
    server = mcp_server_register(name="kv", stdio="kv-local", timeout_s=30)
    assert {tool["name"]: tool["hidden"] for tool in server.tools} == KV_TOOLS
    # The row names the settings' entry; the command itself never reaches the database.
    assert server.url == "" and SERVER_SCRIPT not in str(McpServer.objects.filter(name="kv").values().get())
    settings.PASSBAND_MCP_STDIO_SERVERS = {}
    with pytest.raises(McpUnavailable, match="is not in this worker's settings"):
        client_config(server)


@pytest.mark.django_db
def test_the_token_is_read_from_the_named_variable_on_the_worker(monkeypatch):
    server = McpServer.objects.create(name="kv", url="http://tools/mcp", api_key_env="KV_TOKEN")
    monkeypatch.setenv("KV_TOKEN", "s3cret")
    with outbound_policy(secrets={"KV_TOKEN": ["http://tools"]}):
        assert client_config(server).headers == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in str(McpServer.objects.filter(name="kv").values().get())
    # The operator withdrew the declaration: the worker refuses to send it (an infrastructure outcome).
    with pytest.raises(McpUnavailable, match="not a declared outbound secret") as refused:
        client_config(server)
    assert refused.value.reason == "refused"


@pytest.mark.django_db
@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_the_session_cap_holds_and_a_full_server_is_busy_not_wrong(broker, settings):
    if broker == "filesystem":
        settings.CELERY_BROKER_URL = "filesystem://"
    server = McpServer.objects.create(name=f"capped-{broker}", url="http://tools/mcp", max_sessions=2)
    with session_slot(server, wait_s=1), session_slot(server, wait_s=1):
        if broker == "redis":
            assert sessions_in_use(server) == 2
        with pytest.raises(McpUnavailable) as raised, session_slot(server, wait_s=0):
            pass
        assert raised.value.reason == "busy" and "all 2 sessions stayed in use" in str(raised.value)
    # Released on the way out, on every path: the cap is free again.
    with session_slot(server, wait_s=0):
        pass
    if broker == "redis":
        assert sessions_in_use(server) == 0


@pytest.mark.django_db
def test_a_waiting_session_gets_the_slot_another_releases(settings):
    server = McpServer.objects.create(name="capped-wait", url="http://tools/mcp", max_sessions=1)
    held, got = threading.Event(), threading.Event()
    release = threading.Event()

    def holder():
        with session_slot(server, wait_s=5):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(10)

    def waiter():
        with session_slot(server, wait_s=30):
            got.set()

    waiting = threading.Thread(target=waiter)
    waiting.start()
    assert not got.is_set()  # the cap holds while the first session lasts
    release.set()
    thread.join(10)
    waiting.join(30)
    assert got.is_set()


# -- the staff page and the command -------------------------------------------------------------------


@pytest.mark.django_db
def test_staff_register_and_check_a_server_on_the_page(
    client, staff, kv_url, arithmetic, django_capture_on_commit_callbacks
):
    client.force_login(staff)
    page = client.get("/mcp-servers/")
    assert page.status_code == 200 and "No MCP server registered yet." in page.content.decode()
    form = {"name": "kv", "url": kv_url, "max_sessions": 4, "timeout_s": 10, "reward_tool": "grade"}
    # The request only queues the check (after its transaction commits); a worker runs it.
    with django_capture_on_commit_callbacks() as queued:
        text = client.post("/mcp-servers/", form, follow=True).content.decode()
    assert "Registered kv; a worker is checking it" in text and "Checking" in text
    server = McpServer.objects.get(name="kv")
    assert server.max_sessions == 4 and server.check_status == "pending" and server.tools == [] and len(queued) == 1
    assert check_remote_server(server.pk) == "ok"  # what the worker runs
    checked = client.get("/mcp-servers/").content.decode()
    assert "Answers" in checked and "<code>grade</code> (reward, hidden)" in checked
    with django_capture_on_commit_callbacks() as queued:
        again = client.post("/mcp-servers/kv/check/", follow=True).content.decode()
    assert "A worker is checking kv" in again and len(queued) == 1
    used = client.post("/mcp-servers/kv/use/", {"environment": "arithmetic"}, follow=True).content.decode()
    assert "Episodes of arithmetic now run on kv." in used
    environment = Environment.objects.get(name="arithmetic")
    assert environment.kind == Environment.Kind.MCP and environment.mcp_server.name == "kv"


@pytest.mark.django_db
def test_the_page_shows_a_registration_error_and_saves_nothing(client, staff):
    client.force_login(staff)
    response = client.post(
        "/mcp-servers/", {"name": "kv", "url": "http://u:p@tools/mcp", "max_sessions": 4, "timeout_s": 10}
    )
    assert response.status_code == 200
    assert "url: the URL carries credentials" in response.content.decode()
    assert not McpServer.objects.exists()


@pytest.mark.django_db
def test_the_page_is_for_staff_only(client, alice):
    client.force_login(alice)
    assert client.get("/mcp-servers/").status_code == 403
    assert client.post("/mcp-servers/", {"name": "kv", "url": "http://tools/mcp"}).status_code == 403


@pytest.mark.django_db
def test_the_command_registers_a_server_for_an_environment(kv_url, arithmetic):
    out = StringIO()
    call_command("add_mcp_server", "kv", "--url", kv_url, "--environment", "arithmetic", stdout=out)
    assert "Registered MCP server kv: add, multiply, put, get, grade (reward)." in out.getvalue()
    assert Environment.objects.get(name="arithmetic").mcp_server.name == "kv"
    with pytest.raises(CommandError, match="a server named 'kv' already exists"):
        call_command("add_mcp_server", "kv", "--url", kv_url)


@pytest.mark.django_db
def test_only_staff_accept_a_servers_new_tool_schema(kv_url, alice, staff):
    from curation.server_schemas import mcp_server_schema_accept, mcp_server_schema_accept_later

    server = mcp_server_register(name="kv", url=kv_url)
    McpServer.objects.filter(pk=server.pk).update(tools_changed="the tools changed", tools_accepted_at=None)
    server.refresh_from_db()
    for accept in (mcp_server_schema_accept, mcp_server_schema_accept_later):
        with pytest.raises(CurationError, match="Only staff can accept"):
            accept(server=server, accepted_by=alice)
    server.refresh_from_db()
    assert server.tools_changed == "the tools changed" and server.tools_accepted_at is None
    accepted = mcp_server_schema_accept(server=server, accepted_by=staff)
    assert accepted.tools_changed == "" and accepted.tools_accepted_at is not None
