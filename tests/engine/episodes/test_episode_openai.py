"""Scripted episodes through the OpenAI-compatible test server, with tool calls in chat completions."""

import json

from engine.backends import SamplingParams
from engine.backends.openai_backend import OpenAIBackend
from engine.episodes import backoffice
from engine.episodes.drivers import parse_text_tool_calls, turn_seed
from engine.episodes.runner import EpisodeLimits, run_episode
from engine.episodes.world import SandboxedWorld
from engine.verifiers import verify
from tests.support.openai_server import (
    OpenAITestServer,
    fake_encode,
    render_chat_prompt,
)

PROMPT = [{"role": "system", "content": "You run the back office."}, {"role": "user", "content": "Win deal 1."}]
VERIFIER = {
    "kind": "state_check",
    "environment": "backoffice",
    "seed": 3,
    "checks": [{"table": "deals", "where": {"id": 1}, "expect": {"stage": "won"}}],
}
PARAMS = SamplingParams(temperature=0.7, max_new_tokens=400)


def call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def scripted(*replies):
    """A respond knob that gives the n-th reply on the n-th assistant turn of the conversation."""

    def respond(prompt_text, seed):
        turn = prompt_text.count("<assistant>") - 1
        return replies[min(turn, len(replies) - 1)]

    return respond


def episode_with(server, limits=EpisodeLimits(), world=None):
    backend = OpenAIBackend(base_url=server.base_url, model="fake-model", max_retries=0)
    try:
        return run_episode(
            backend=backend,
            messages=PROMPT,
            tools=backoffice.TOOL_SCHEMAS,
            environment="backoffice",
            world_seed=3,
            seed=11,
            params=PARAMS,
            limits=limits,
            world=world,
        )
    finally:
        backend.close()


def test_a_scripted_episode_reads_acts_and_passes_the_state_check():
    replies = (
        call("get_record", table="deals", id=1),
        call("update_record", table="deals", id=1, fields={"stage": "won"}),
        "Deal 1 is won.",
    )
    with OpenAITestServer(respond=scripted(*replies), tool_parser=True) as server:
        episode = episode_with(server)
        requests = [request.body for request in server.requests]
    transcript = episode.transcript
    assert transcript["stop_reason"] == "answered"
    assert [len(turn["tool_calls"]) for turn in transcript["turns"]] == [1, 1, 0]
    assert transcript["turns"][1]["tool_calls"][0]["name"] == "update_record"
    assert transcript["turns"][1]["observations"][0]["status"] == "ok"
    assert transcript["counts"]["tool_calls"] == 2 and transcript["counts"]["ok"] == 2
    assert transcript["final_state"]["deals"][0]["stage"] == "won"
    # Every request carried the tools, its turn's seed, and the conversation so far with the observations.
    assert all(body["tools"] == backoffice.TOOL_SCHEMAS for body in requests)
    assert [body["seed"] for body in requests] == [turn_seed(11, index) for index in range(3)]
    assert requests[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_record"
    assert requests[1]["messages"][-1]["role"] == "tool"
    assert json.loads(requests[1]["messages"][-1]["content"])["stage"] != "won"
    # Exact capture per turn: the server's prompt ids and sampled ids (EOS included), one logprob each.
    for turn, body in zip(transcript["turns"], requests, strict=True):
        assert turn["prompt_token_ids"] == fake_encode(render_chat_prompt(body["messages"]))
        assert turn["completion_token_ids"][-1] == 2
        assert len(turn["logprobs"]) == len(turn["completion_token_ids"])
    assert verify(verifier=VERIFIER, completion=transcript).outcome == "pass"
    assert episode.generation.text == "Deal 1 is won." and episode.generation.error is None


def test_an_episode_that_only_talks_fails_the_state_check():
    with OpenAITestServer(respond=scripted("I marked deal 1 as won."), tool_parser=True) as server:
        transcript = episode_with(server).transcript
    assert transcript["stop_reason"] == "answered" and len(transcript["turns"]) == 1
    assert verify(verifier=VERIFIER, completion=transcript).outcome == "fail"


def test_malformed_calls_unknown_tools_and_bad_arguments_are_observations_and_counted():
    replies = (
        "<tool_call>{not json</tool_call>",
        call("delete_everything"),
        call("update_record", table="deals", id=1, fields={"stage": "closed-won"}),
        call("get_record", table="deals", id=1, colour="red"),
        "Sorry.",
    )
    with OpenAITestServer(respond=scripted(*replies), tool_parser=True) as server:
        transcript = episode_with(server, limits=EpisodeLimits(max_turns=8)).transcript
        last_request = server.requests[-1].body
    counts = transcript["counts"]
    assert (counts["malformed"], counts["unknown_tool"], counts["bad_arguments"], counts["ok"]) == (1, 1, 2, 0)
    assert transcript["stop_reason"] == "answered"
    tool_messages = [message for message in last_request["messages"] if message["role"] == "tool"]
    assert len(tool_messages) == 4
    assert all("error" in json.loads(message["content"]) for message in tool_messages)
    assert "closed-won" in tool_messages[2]["content"]
    assert verify(verifier=VERIFIER, completion=transcript).outcome == "fail"


def test_text_tool_calls_are_used_when_the_server_has_no_tool_parser():
    replies = (call("update_record", table="deals", id=1, fields={"stage": "won"}), "Done.")
    with OpenAITestServer(respond=scripted(*replies), tool_parser=False) as server:
        transcript = episode_with(server).transcript
    assert transcript["counts"]["ok"] == 1
    assert verify(verifier=VERIFIER, completion=transcript).outcome == "pass"


def test_the_turn_limit_ends_an_episode_that_never_answers():
    with OpenAITestServer(respond=scripted(call("get_record", table="deals", id=1)), tool_parser=True) as server:
        episode = episode_with(server, limits=EpisodeLimits(max_turns=2))
    assert episode.transcript["stop_reason"] == "max_turns" and len(episode.transcript["turns"]) == 2
    assert episode.generation.truncated and episode.generation.finish_reason == "length"


def test_the_token_limit_counts_every_turn():
    long_call = call("search_records", table="deals", query="x" * 100)
    with OpenAITestServer(respond=scripted(long_call), tool_parser=True) as server:
        transcript = episode_with(server, limits=EpisodeLimits(max_turns=10, max_completion_tokens=300)).transcript
    assert transcript["stop_reason"] == "max_tokens"
    assert sum(len(turn["completion_token_ids"]) for turn in transcript["turns"]) <= 300


def test_a_stuck_tool_ends_the_episode_as_a_timeout():
    world = SandboxedWorld(environment="backoffice", seed=3, tool_seconds=1)
    world._source = "import time\ntime.sleep(60)\n"  # stands for a tool that hangs
    with OpenAITestServer(respond=scripted(call("get_record", table="deals", id=1)), tool_parser=True) as server:
        transcript = episode_with(server, world=world).transcript
    assert transcript["stop_reason"] == "tool_timeout" and transcript["counts"]["timeout"] == 1
    assert verify(verifier=VERIFIER, completion=transcript).outcome == "timeout"


def test_a_tool_of_the_world_that_the_task_does_not_offer_never_reaches_the_world():
    # The back office has update_record; this task offers only get_record. The world must never see the call.
    offered = [schema for schema in backoffice.TOOL_SCHEMAS if schema["function"]["name"] == "get_record"]
    replies = (call("update_record", table="deals", id=1, fields={"stage": "won"}), "Deal 1 is won.")
    with OpenAITestServer(respond=scripted(*replies), tool_parser=True) as server:
        backend = OpenAIBackend(base_url=server.base_url, model="fake-model", max_retries=0)
        try:
            transcript = run_episode(
                backend=backend,
                messages=PROMPT,
                tools=offered,
                environment="backoffice",
                world_seed=3,
                seed=11,
                params=PARAMS,
            ).transcript
        finally:
            backend.close()
    (observation,) = transcript["turns"][0]["observations"]
    assert (
        observation["status"] == "unknown_tool" and "does not offer the tool 'update_record'" in observation["content"]
    )
    assert transcript["counts"]["not_offered"] == 1 and transcript["offered_tools"] == ["get_record"]
    assert verify(verifier=VERIFIER, completion=transcript).outcome == "fail"


def test_a_failing_server_is_a_generation_error_not_an_attempt():
    with OpenAITestServer(fail_first=100, fail_with=400) as server:
        episode = episode_with(server)
    assert episode.transcript["stop_reason"] == "generation_error"
    assert episode.generation.finish_reason == "error" and episode.generation.error


def test_parse_text_tool_calls():
    calls = parse_text_tool_calls(
        'ok <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
    )
    assert [(c.name, c.arguments, c.problem) for c in calls] == [("a", {"x": 1}, ""), ("b", {"y": 2}, "")]
    assert parse_text_tool_calls("no calls here") == []
    assert parse_text_tool_calls("<tool_call>{oops")[0].problem
    assert parse_text_tool_calls('<tool_call>{"arguments": {}}</tool_call>')[0].problem
    assert parse_text_tool_calls('<tool_call>{"name": "a", "arguments": [1]}</tool_call>')[0].problem
    assert parse_text_tool_calls('{"name": "a", "arguments": {}}')[0].name == "a"


def test_a_tool_call_with_an_integer_too_long_to_convert_is_a_malformed_call():
    # json raises a plain ValueError (not JSONDecodeError) past Python's integer digit limit.
    reply = '<tool_call>{"name": "get_record", "arguments": {"table": "deals", "id": ' + "7" * 5000 + "}}</tool_call>"
    (call,) = parse_text_tool_calls(reply)
    assert call.problem.startswith("the tool call is not valid JSON (Exceeds the limit")
    assert call.name == "" and call.arguments is None
