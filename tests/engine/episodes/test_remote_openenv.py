"""engine/episodes/remote_openenv.py against a real OpenEnv server: the one `openenv init` generates
(openenv-core's template), run by uvicorn as its own process."""

import json
import socket
import threading

import pytest

from engine.episodes.remote_mcp import RemoteSchemaError, RemoteUnavailable
from engine.episodes.remote_openenv import (
    OpenEnvServerConfig,
    OpenEnvWorld,
    action_tool_schema,
    server_tools,
    ws_url,
)
from tests.support.mcp_kv_server import free_port, stop_process
from tests.support.openenv_template_server import generate, start_process, word_for


@pytest.fixture
def template_root(openenv_template_root):
    return openenv_template_root


@pytest.fixture
def echo_url(openenv_echo_url):
    return openenv_echo_url


def config(url, **options):
    return OpenEnvServerConfig(name="echo", url=url, timeout_s=10, **options)


def test_the_ws_endpoint_of_a_base_url():
    assert ws_url("http://env:8000") == "ws://env:8000/ws"
    assert ws_url("https://env.example/envs/echo/") == "wss://env.example/envs/echo/ws"


def test_the_action_schema_from_the_server_is_the_step_tool_without_openenvs_metadata(echo_url):
    (tool,) = server_tools(config(echo_url))
    assert tool["name"] == "step" and not tool["hidden"]
    assert tool["parameters"]["properties"] == {
        "message": {"description": "Message to echo back", "title": "Message", "type": "string"}
    }
    assert tool["parameters"]["required"] == ["message"]
    assert "metadata" not in json.dumps(tool["parameters"])
    assert "just a message to echo" in tool["description"]


def test_an_action_schema_that_is_not_a_json_schema_is_refused_naming_where():
    with pytest.raises(RemoteSchemaError, match="tool step: inputSchema is not a valid JSON Schema at properties/x"):
        action_tool_schema({"type": "object", "properties": {"x": {"type": "integer-ish"}}})
    with pytest.raises(RemoteSchemaError, match="inputSchema.type must be 'object'"):
        action_tool_schema({"type": "array"})


def test_a_session_is_reset_with_the_seed_and_ends_when_the_environment_says_done(echo_url):
    for seed in (1, 2, 5):
        with OpenEnvWorld(config=config(echo_url), seed=seed) as world:
            assert f"Echo the word: {word_for(seed)}" in world.opening_messages[0]["content"]
            wrong = world.call("step", {"message": "nothing"})
            assert wrong.status == "ok" and json.loads(wrong.content)["reward"] == 0.0 and not world.done
            right = world.call("step", {"message": word_for(seed)})
            assert json.loads(right.content) == {
                "observation": {"echoed_message": word_for(seed), "message_length": len(word_for(seed))},
                "reward": 1.0,
                "done": True,
            }
            assert world.done
            # After done no step reaches the server.
            assert world.call("step", {"message": word_for(seed)}).status == "tool_error"
            final = world.state()
        assert final["step_rewards"] == [0.0, 1.0] and final["state"]["step_count"] == 2
        assert final["environment_reward"][0]["reward"] == 1.0 and final["reset_reward"] == 0.0


def test_each_world_is_its_own_environment_instance(echo_url):
    with (
        OpenEnvWorld(config=config(echo_url), seed=1) as first,
        OpenEnvWorld(config=config(echo_url), seed=2) as second,
    ):
        first.call("step", {"message": "a"})
        assert first.state()["state"]["step_count"] == 1
        assert second.state()["state"]["step_count"] == 0
        assert first.state()["state"]["episode_id"] != second.state()["state"]["episode_id"]


@pytest.mark.parametrize(
    ("name", "arguments", "status", "error"),
    [
        ("step", {"mesage": "x"}, "bad_arguments", "'message' is a required property"),
        ("step", {"message": 3}, "bad_arguments", "message: 3 is not of type 'string'"),
        ("step", ["x"], "bad_arguments", "arguments must be a JSON object"),
        ("reset", {}, "unknown_tool", "unknown tool 'reset'"),
    ],
)
def test_wrong_calls_are_the_models_error_not_the_servers(echo_url, name, arguments, status, error):
    with OpenEnvWorld(config=config(echo_url), seed=1) as world:
        result = world.call(name, arguments)
        assert result.status == status and error in json.loads(result.content)["error"]
        assert world.state()["state"]["step_count"] == 0


def test_an_unreachable_server_and_a_dead_one_are_unavailable_not_wrong_answers(template_root):
    with pytest.raises(RemoteUnavailable) as raised:
        OpenEnvWorld(config=config(f"http://127.0.0.1:{free_port()}")).__enter__()
    assert raised.value.reason == "unreachable" and "failed reading /schema" in str(raised.value)
    process, url = start_process(root=template_root)
    try:
        with OpenEnvWorld(config=config(url), seed=1) as world:
            stop_process(process)
            with pytest.raises(RemoteUnavailable) as raised:
                world.call("step", {"message": "x"})
        assert raised.value.reason == "disconnected"
    finally:
        stop_process(process)


def test_a_server_that_is_not_openenv_is_a_server_error(tmp_path):
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RemoteUnavailable) as raised:
            server_tools(config(f"http://127.0.0.1:{server.server_address[1]}"))
        assert raised.value.reason == "server_error" and "HTTP 404" in str(raised.value)
    finally:
        server.shutdown()


def test_a_server_that_never_answers_times_out():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts connections, never answers them
    try:
        with pytest.raises(RemoteUnavailable) as raised:
            OpenEnvWorld(
                config=OpenEnvServerConfig(name="x", url=f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=0.5)
            ).__enter__()
        assert raised.value.reason == "timeout"
    finally:
        listener.close()


def test_a_full_server_is_busy_not_a_wrong_answer(tmp_path):
    root = generate(tmp_path, max_sessions=1)
    process, url = start_process(root=root)
    try:
        with OpenEnvWorld(config=config(url), seed=1):
            with pytest.raises(RemoteUnavailable) as raised:
                OpenEnvWorld(config=config(url), seed=2).__enter__()
        assert raised.value.reason == "busy" and "CAPACITY_REACHED" in str(raised.value)
    finally:
        stop_process(process)


def test_a_step_that_hangs_past_the_timeout_and_one_that_crashes_are_the_servers_failures(echo_url):
    with OpenEnvWorld(config=OpenEnvServerConfig(name="echo", url=echo_url, timeout_s=0.5), seed=1) as world:
        with pytest.raises(RemoteUnavailable) as raised:
            world.call("step", {"message": "sleep 2"})
    assert raised.value.reason == "timeout" and "gave no answer stepping within 0.5 s" in str(raised.value)
    with OpenEnvWorld(config=config(echo_url), seed=1) as world:
        with pytest.raises(RemoteUnavailable) as raised:
            world.call("step", {"message": "crash"})
    assert raised.value.reason == "server_error"
    assert "EXECUTION_ERROR: the environment crashed" in str(raised.value)
