"""json and tool_calls."""

import json

import pytest

from engine.verifiers import verify


def outcome(verifier, completion, answer=None):
    return verify(verifier=verifier, completion=completion, answer=answer).outcome


PERSON_SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
}


# -- json ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "completion", "expected"),
    [
        ({}, '{"a": 1}', "pass"),
        ({}, "[1, 2]", "pass"),
        ({}, "{'a': 1}", "fail"),
        ({}, "", "fail"),
        ({}, 'Here you go:\n```json\n{"a": 1}\n```', "pass"),
        ({}, 'The object is {"a": {"b": [1, 2]}} as requested.', "pass"),
        ({"extract": False}, 'Here: {"a": 1}', "fail"),
        ({"schema": PERSON_SCHEMA}, '{"name": "Ada", "age": 36}', "pass"),
        ({"schema": PERSON_SCHEMA}, '{"name": "Ada", "age": -1}', "fail"),
        ({"schema": PERSON_SCHEMA}, '{"name": "Ada"}', "fail"),
        ({"expected": {"/name": "Ada", "/tags/1": "logic"}}, '{"name": "Ada", "tags": ["math", "logic"]}', "pass"),
        ({"expected": {"/tags/1": "logic"}}, '{"tags": ["math"]}', "fail"),
        ({"expected": {"/age": 36}}, '{"age": 36.0}', "pass"),
        ({"expected": {"/flag": 1}}, '{"flag": true}', "fail"),
        ({"expected": {"/a~1b": 2}}, '{"a/b": 2}', "pass"),
        ({"expected": {"": {"x": 1}}}, '{"x": 1}', "pass"),
    ],
)
def test_json(config, completion, expected):
    assert outcome({"kind": "json", **config}, completion) == expected


def test_json_value_completion_is_taken_as_is():
    assert outcome({"kind": "json", "schema": PERSON_SCHEMA}, {"name": "Ada", "age": 36}) == "pass"
    assert outcome({"kind": "json", "schema": {"type": "array"}}, [1, 2, 3]) == "pass"


def test_json_equals_answer():
    config = {"kind": "json", "equals_answer": True}
    assert outcome(config, '{"b": [1, 2], "a": 1}', answer='{"a": 1, "b": [1, 2]}') == "pass"
    assert outcome(config, '{"a": 1}', answer='{"a": 2}') == "fail"
    assert outcome(config, '{"a": 1}', answer="not json") == "error"


def test_json_detail_locates_the_problem():
    verdict = verify(verifier={"kind": "json", "schema": PERSON_SCHEMA}, completion='{"name": "Ada", "age": "old"}')
    assert verdict.outcome == "fail"
    assert "/age" in verdict.detail


# -- tool_calls ------------------------------------------------------------------------------

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
TIME = {"name": "get_time", "arguments": {"zone": "CET"}}


def openai_call(name, arguments, text=True):
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments) if text else arguments},
    }


def test_openai_style_list_passes():
    config = {"kind": "tool_calls", "calls": [WEATHER]}
    assert outcome(config, [openai_call("get_weather", {"unit": "celsius", "city": "Paris"})]) == "pass"


def test_assistant_message_and_message_list():
    config = {"kind": "tool_calls", "calls": [WEATHER, TIME]}
    message = {"role": "assistant", "content": None, "tool_calls": [openai_call(**WEATHER), openai_call(**TIME)]}
    assert outcome(config, message) == "pass"
    conversation = [
        {"role": "user", "content": "weather and time in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [openai_call(**WEATHER)]},
        {"role": "tool", "content": "12C"},
        {"role": "assistant", "content": None, "tool_calls": [openai_call(**TIME)]},
    ]
    assert outcome(config, conversation) == "pass"


def test_json_text_and_hermes_tags():
    config = {"kind": "tool_calls", "calls": [WEATHER]}
    assert outcome(config, json.dumps([WEATHER])) == "pass"
    assert outcome(config, f"I will call it.\n<tool_call>\n{json.dumps(WEATHER)}\n</tool_call>") == "pass"
    assert outcome(config, "It is sunny in Paris.") == "fail"


def test_order_matters_unless_disabled():
    ordered = {"kind": "tool_calls", "calls": [WEATHER, TIME]}
    swapped = [openai_call(**TIME), openai_call(**WEATHER)]
    assert outcome(ordered, swapped) == "fail"
    assert outcome({**ordered, "ordered": False}, swapped) == "pass"


def test_wrong_arguments_fail_and_subset_mode():
    config = {"kind": "tool_calls", "calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    assert outcome(config, [openai_call("get_weather", {"city": "London"})]) == "fail"
    with_extra = [openai_call("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert outcome(config, with_extra) == "fail"
    assert outcome({**config, "arguments": "subset"}, with_extra) == "pass"


def test_extra_calls():
    config = {"kind": "tool_calls", "calls": [WEATHER]}
    calls = [openai_call(**TIME), openai_call(**WEATHER)]
    assert outcome(config, calls) == "fail"
    assert outcome({**config, "allow_extra_calls": True}, calls) == "pass"
    assert outcome({**config, "allow_extra_calls": True, "ordered": False}, calls) == "pass"


def test_unordered_matching_finds_an_assignment():
    loose = {"name": "f", "arguments": {"a": 1}}
    strict = {"name": "f", "arguments": {"a": 1, "b": 2}}
    config = {"kind": "tool_calls", "calls": [loose, strict], "ordered": False, "arguments": "subset"}
    # A greedy match would give the first actual call to `loose` and leave `strict` unmatched.
    assert outcome(config, [openai_call("f", {"a": 1, "b": 2}), openai_call("f", {"a": 1})]) == "pass"


def test_malformed_arguments_fail():
    config = {"kind": "tool_calls", "calls": [WEATHER]}
    bad = [{"type": "function", "function": {"name": "get_weather", "arguments": "{city: Paris"}}]
    verdict = verify(verifier=config, completion=bad)
    assert verdict.outcome == "fail"
    assert "not valid JSON" in verdict.detail


def test_expected_calls_from_the_reference_answer():
    config = {"kind": "tool_calls"}
    assert outcome(config, [openai_call(**WEATHER)], answer=json.dumps([WEATHER])) == "pass"
    assert outcome(config, [openai_call(**TIME)], answer=json.dumps([WEATHER])) == "fail"
    assert outcome(config, [openai_call(**TIME)], answer="not calls") == "error"
    assert outcome(config, "", answer=json.dumps([WEATHER])) == "fail"
