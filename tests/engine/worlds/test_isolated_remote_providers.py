"""An installed provider of a remote protocol runs in helpers like any installed provider (engine/worlds/isolated.py);
its client's requests are made by this process (engine/worlds/remote_relay.py), to the registered server alone,
with the server's credentials, which never enter the helper. A server that cannot be reached, or whose tools
changed, is RemoteUnavailable (infrastructure) even when the provider's code catches the error."""

import contextlib
import time
from importlib import metadata

import pytest

from engine.episodes.remote_mcp import RemoteUnavailable
from engine.sandbox.worker_pool import HelperScript
from engine.worlds import isolated, registry
from engine.worlds.provider import RemoteEndpoint, RemoteServer, WorldOptions, WorldTask
from tests.support import counter_protocol
from tests.support import hostile_remote_protocol as leaky
from tests.support.counter_protocol import serve_counter_http

COUNTER = "tests.support.counter_protocol:PROVIDER"
BEARER = {"Authorization": "Bearer passband-test-server-token"}


@pytest.fixture(scope="module")
def built():
    return registry.build(
        [
            metadata.EntryPoint(name=name, value=f"{module}:PROVIDER", group=registry.GROUP)
            for name, module in (
                (counter_protocol.NAME, "tests.support.counter_protocol"),
                (leaky.NAME, "tests.support.hostile_remote_protocol"),
            )
        ]
    )


def endpoint(url: str) -> RemoteEndpoint:
    return RemoteEndpoint(name="counter", url=url, headers=BEARER, timeout_s=5.0)


def counter_task(url: str, *, guard=None) -> WorldTask:
    server = RemoteServer(
        name="counter",
        protocol=counter_protocol.NAME,
        client_config=lambda: endpoint(url),
        session_slot=contextlib.nullcontext,
        tools_guard=guard or (lambda offered, allowed: None),
    )
    verifier = {"kind": "episode_reward", "reward": "environment", "seed": 3}
    return WorldTask(prompt=[{"role": "user", "content": "Count."}], tools=[], verifier=verifier, server=server)


def test_the_listing_runs_in_a_helper_and_the_credentials_stay_here(built):
    provider = built.get(leaky.NAME)
    assert provider.remote.list_tools is not leaky.list_tools and provider.remote.label == "Leaky server"
    seen: list[dict] = []
    with serve_counter_http(seen) as url:
        # The hostile listing raises when any escape worked, the server's headers seen included.
        tools = provider.remote.list_tools(endpoint(url))
    assert [tool["function"]["name"] for tool in tools] == [tool["function"]["name"] for tool in leaky.TOOL_SCHEMAS]
    assert [headers.get("Authorization") for headers in seen] == [BEARER["Authorization"]]


def test_an_episode_reaches_its_server_through_this_process(built):
    provider = built.get(counter_protocol.NAME)
    seen: list[dict] = []
    with serve_counter_http(seen) as url:
        task = counter_task(url)
        assert provider.claims(task)
        with provider.prepare(task, WorldOptions()).episode(seed=0) as opened:
            assert opened.environment == counter_protocol.NAME and opened.tools == counter_protocol.TOOL_SCHEMAS
            assert opened.world.call("counter_add", {"amount": 7}).status == "ok"
            assert opened.world.state()["environment_reward"] == [{"reward": 1.0, "detail": "10"}]
    assert seen and {headers.get("Authorization") for headers in seen} == {BEARER["Authorization"]}


def test_a_server_gone_mid_episode_or_never_there_is_unavailable(built):
    provider = built.get(counter_protocol.NAME)
    with contextlib.ExitStack() as episode:
        with serve_counter_http() as url:
            opened = episode.enter_context(provider.prepare(counter_task(url), WorldOptions()).episode(seed=0))
            assert opened.world.call("counter_read", {}).status == "ok"
        # The provider turns the failed request into a tool error; this process knows the server was not reached.
        with pytest.raises(RemoteUnavailable, match="ConnectError") as gone:
            opened.world.call("counter_read", {})
    assert gone.value.reason == "unreachable"
    with pytest.raises(RemoteUnavailable, match="ConnectError") as never:
        with provider.prepare(counter_task(url), WorldOptions()).episode(seed=0):
            pass
    assert never.value.reason == "unreachable"


def test_changed_tools_are_unavailable_even_when_checked_in_the_helper(built):
    def guard(offered, allowed):
        raise RemoteUnavailable("server counter: its tools changed", reason="schema_changed")

    with serve_counter_http() as url:
        with pytest.raises(RemoteUnavailable, match="its tools changed") as changed:
            with (
                built.get(counter_protocol.NAME).prepare(counter_task(url, guard=guard), WorldOptions()).episode(seed=0)
            ):
                pass
    assert changed.value.reason == "schema_changed"


def test_a_request_that_times_out_waiting_for_this_process_leaves_its_helper_serving():
    helper = HelperScript(
        isolated.WORKER_SCRIPT, memory_bytes=isolated.WORKER_MEMORY_BYTES, arguments=(COUNTER,)
    ).dedicated()
    try:
        listing = {"op": "list_tools", "name": "counter", "endpoint": {"url": "http://127.0.0.1:9", "timeout_s": 5.0}}
        helper.send({**listing, "timeout_seconds": 0.5})
        question = helper.receive(deadline=time.monotonic() + 30)
        assert question["host"]["op"] == "http" and question["host"]["url"] == "http://127.0.0.1:9/tools"
        # Not answered in its time: the helper says so, and the answer that comes late is passed by.
        assert "timeout" in helper.receive(deadline=time.monotonic() + 30)
        helper.send({"host_answer": {"status": 200, "headers": [], "body": ""}})
        helper.send({"op": "claims", "task": isolated.task_request(counter_task("http://127.0.0.1:9"))})
        assert helper.receive(deadline=time.monotonic() + 30) == {"claims": True}
    finally:
        helper.kill()
