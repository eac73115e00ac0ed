"""engine/episodes/remote_mcp.py against a real MCP server process built on the SDK (not Passband's code)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.episodes.remote_mcp import (
    McpSchemaError,
    McpServerConfig,
    McpUnavailable,
    McpWorld,
    openai_tool_schema,
    parse_stdio_servers,
    reward_value,
    server_tools,
)
from engine.outbound import url_problem
from tests.support.mcp_kv_server import free_port, serve_mcp_kv

SERVER_SCRIPT = str(Path(__file__).resolve().parents[2] / "support" / "mcp_kv_server.py")


@pytest.fixture
def kv_url(mcp_kv_url):
    return mcp_kv_url


def config(url, **options):
    return McpServerConfig(name="kv", url=url, timeout_s=10, **options)


def test_an_input_schema_becomes_an_openai_function_schema():
    tool = {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]},
    }
    assert openai_tool_schema(tool) == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]},
        },
    }
    # A tool without arguments still gets an object schema with properties, as OpenAI servers want.
    assert openai_tool_schema({"name": "ping", "inputSchema": {"type": "object"}})["function"]["parameters"] == {
        "type": "object",
        "properties": {},
    }


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (
            {"name": "x", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer-ish"}}}},
            "properties/a",
        ),
        ({"name": "x", "inputSchema": {"type": "array"}}, "inputSchema.type must be 'object'"),
        ({"name": "x", "inputSchema": "object"}, "inputSchema must be a JSON object"),
        ({"name": "x", "inputSchema": {"type": "object", "required": "a"}}, "not a valid JSON Schema at required"),
        ({"name": "two words", "inputSchema": {"type": "object"}}, "a name must be 1-64 letters"),
    ],
)
def test_an_unusable_input_schema_is_refused_naming_the_tool_and_where(tool, message):
    with pytest.raises(McpSchemaError) as raised:
        openai_tool_schema(tool)
    assert str(raised.value).startswith(f"tool {tool['name']!r}" if " " in tool["name"] else f"tool {tool['name']}")
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://tools:8000/mcp", ""),
        ("https://tools.example.org/mcp?region=eu", ""),
        ("", "the URL is empty"),
        ("ftp://tools/mcp", "must start with http:// or https://"),
        ("file:///etc/passwd", "must start with http:// or https://"),
        ("http:///mcp", "has no host"),
        ("http://user:secret@tools/mcp", "carries credentials"),
        ("http://tools/mcp?api_key=abc", "query carries a secret (api_key=...)"),
        ("http://tools:port/mcp", "cannot be parsed"),
        ("http://tools/mcp#top", "has a fragment"),
    ],
)
def test_outbound_url_rules(url, problem):
    found = url_problem(url)
    assert (problem in found and bool(found)) if problem else found == ""


def result(text="", *, structured=None, is_error=False):
    return SimpleNamespace(content=[SimpleNamespace(text=text)], structured_content=structured, is_error=is_error)


@pytest.mark.parametrize(
    ("tool_result", "reward"),
    [
        (result('{"reward": 1.0}', structured={"reward": 1.0, "detail": "ok"}), 1.0),
        (result("0.25"), 0.25),
        (result('{"reward": 0}'), 0.0),
        (result("", structured={"result": 0.5}), 0.5),
        (result("1.5"), None),
        (result("yes"), None),
        (result("1.0", is_error=True), None),
    ],
)
def test_the_reward_tool_result_is_read_as_a_number_in_0_1(tool_result, reward):
    value, detail = reward_value(tool_result)
    assert value == reward
    if reward is None:
        assert detail.startswith("the reward tool")


def test_each_world_is_its_own_session_and_the_reward_tool_is_hidden(kv_url):
    with McpWorld(config=config(kv_url), reward_arguments={"key": "k", "expect": "v"}) as first:
        assert sorted(schema["function"]["name"] for schema in first.tool_schemas) == ["add", "get", "multiply", "put"]
        assert first.call("put", {"key": "k", "value": "v"}).status == "ok"
        assert first.call("get", {"key": "k"}).content == "v"
        with McpWorld(config=config(kv_url), reward_arguments={"key": "k", "expect": "v"}) as second:
            missing = second.call("get", {"key": "k"})
            assert missing.status == "tool_error" and "no value under 'k'" in missing.content
            assert second.state()["environment_reward"][0]["reward"] == 0.0
        assert first.state() == {
            "environment_reward": [{"tool": "grade", "reward": 1.0, "detail": "k='v', expected 'v'"}]
        }
        hidden = first.call("grade", {"key": "k", "expect": "v"})
        assert hidden.status == "unknown_tool" and "the tools are add, get, multiply, put" in hidden.content


def test_wrong_arguments_are_the_models_error_not_the_servers(kv_url):
    with McpWorld(config=config(kv_url)) as world:
        wrong = world.call("add", {"a": "seventeen"})
        assert wrong.status == "tool_error" and "validation error" in wrong.content


def test_a_task_can_offer_only_some_of_the_servers_tools(kv_url):
    with McpWorld(config=config(kv_url), allowed=("add",)) as world:
        assert [schema["function"]["name"] for schema in world.tool_schemas] == ["add"]
        assert world.call("put", {"key": "k", "value": "v"}).status == "unknown_tool"


def test_no_reward_tool_means_no_environment_reward(kv_url):
    with McpWorld(config=config(kv_url, reward_tool="score")) as world:
        assert "grade" in [schema["function"]["name"] for schema in world.tool_schemas]
        assert world.state() == {}


def test_an_unreachable_server_and_a_dead_one_are_unavailable_not_tool_errors():
    with pytest.raises(McpUnavailable) as raised:
        McpWorld(config=config(f"http://127.0.0.1:{free_port()}/mcp")).__enter__()
    assert raised.value.reason == "unreachable" and "failed opening a session" in str(raised.value)
    with serve_mcp_kv() as url:
        world = McpWorld(config=config(url)).__enter__()
        assert world.call("add", {"a": 1, "b": 2}).content == "3.0"
    try:
        with pytest.raises(McpUnavailable) as raised:
            world.call("add", {"a": 1, "b": 2})
        assert raised.value.reason in ("disconnected", "unreachable", "server_error")
        with pytest.raises(McpUnavailable):
            world.state()
    finally:
        world.close()


def test_a_request_past_the_timeout_is_unavailable_and_the_session_still_closes():
    with serve_mcp_kv(slow_tool=True) as url:
        with McpWorld(config=McpServerConfig(name="kv", url=url, timeout_s=1)) as world:
            with pytest.raises(McpUnavailable) as raised:
                world.call("wait", {"seconds": 60})
            assert raised.value.reason == "timeout" and "failed calling wait" in str(raised.value)


def test_a_server_with_an_invalid_input_schema_is_refused_by_tool_name():
    with serve_mcp_kv(bad_schema=True) as url, pytest.raises(McpSchemaError) as raised:
        server_tools(config(url))
    assert str(raised.value).startswith("tool broken: inputSchema is not a valid JSON Schema at properties/x/type")


def test_a_stdio_server_from_settings_runs_one_process_per_session():
    stdio = McpServerConfig(name="kv", command=(sys.executable, SERVER_SCRIPT, "--stdio"), timeout_s=30)
    with McpWorld(config=stdio, reward_arguments={"key": "a", "expect": "1"}) as world:
        assert world.call("put", {"key": "a", "value": "1"}).status == "ok"
        assert world.state()["environment_reward"][0]["reward"] == 1.0
    listed = {tool["name"]: tool["hidden"] for tool in server_tools(stdio)}
    assert listed == {"add": False, "multiply": False, "put": False, "get": False, "grade": True}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "must be a JSON object"),
        ('{"kv": {"command": []}}', "command must be a non-empty list of strings"),
        ('{"kv": {"command": ["x"], "cwd": "/"}}', "must be an object with command (and env)"),
        ('{"kv": {"command": ["x"], "env": {"A": 1}}}', "env must be an object of strings"),
        ("{", "is not JSON"),
    ],
)
def test_stdio_servers_in_settings_are_checked(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_stdio_servers(text)
    assert parse_stdio_servers('{"kv": {"command": ["python", "-m", "kv"]}}') == {
        "kv": {"command": ["python", "-m", "kv"], "env": {}}
    }
