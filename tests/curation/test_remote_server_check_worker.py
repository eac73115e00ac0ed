"""A server's registration check runs in a real Celery worker, never in the web request: a server that
accepts and never answers holds no request (the page answers at once, the check pending) and the
worker's check is cut by the operator's check timeout; a server that redirects to the metadata
stand-in is not followed. The page shows each answer."""

import pytest

from curation.models import McpServer
from tests.support.hostile_servers import MetadataListener, Redirector, Staller
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.workers]


@pytest.mark.django_db(transaction=True)
def test_the_check_runs_in_a_worker_cut_by_its_timeout_and_follows_no_redirect(client, staff, tmp_path):
    flush_broker()
    client.force_login(staff)
    form = {"max_sessions": 4, "timeout_s": 600, "reward_tool": "grade"}
    with (
        MetadataListener() as metadata,
        Redirector(to=metadata.url) as redirector,
        Staller() as staller,
        running_worker(
            queues="default", extra_env={"PASSBAND_OUTBOUND_CHECK_TIMEOUT_S": "2"}, log_path=tmp_path / "worker.log"
        ),
    ):
        # The server's own timeout is 600 s: only the worker's check timeout can end its check.
        stalls = client.post("/mcp-servers/", {**form, "name": "stalls", "url": f"{staller.url}/mcp"}, follow=True)
        assert "Registered stalls; a worker is checking it" in stalls.content.decode()
        assert McpServer.objects.get(name="stalls").check_status == "pending"
        moved = {**form, "name": "moved", "protocol": "openenv", "url": f"{redirector.url}/env"}
        assert "Registered moved" in client.post("/mcp-servers/", moved, follow=True).content.decode()

        def answered():
            servers = McpServer.objects.filter(check_status__in=["ok", "failed"])
            return servers.count() == 2 and {server.name: server for server in servers}

        servers = wait_for(answered, timeout=90, what="the worker's checks")
        assert staller.connections >= 1
        page = client.get("/mcp-servers/").content.decode()
    assert servers["stalls"].check_status == "failed"
    assert "url: the server did not answer" in servers["stalls"].check_error
    assert servers["moved"].check_status == "failed"
    assert "a redirect, not followed" in servers["moved"].check_error
    assert page.count("Check failed: url:") == 2
    assert metadata.connections == 0
