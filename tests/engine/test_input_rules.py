"""engine.input_rules: the one rule for text and decoded JSON, at its boundaries."""

import pytest

from engine import input_rules
from engine.input_rules import MAX_JSON_DEPTH, InputError, fields_problem, json_text, value_problem


def nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def test_the_depth_limit_is_exact():
    assert value_problem(nested(MAX_JSON_DEPTH)) is None
    problem = value_problem(nested(MAX_JSON_DEPTH + 1))
    assert problem is not None and problem.field == "a"
    assert problem.reason.startswith(f"nests deeper than {MAX_JSON_DEPTH} levels at a.a.a")


def test_any_depth_is_checked_without_recursion():
    deep: list = []
    for _ in range(200_000):
        deep = [deep]
    problem = value_problem({"metadata": deep})
    assert problem is not None and problem.field == "metadata" and "nests deeper" in problem.reason


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (
            {"messages": [{"content": "ok"}, {"content": "a\x00"}]},
            "messages",
            "NUL byte (\\u0000) at character 2 of messages[1].content",
        ),
        ({"meta": {"x\x00": 1}}, "meta", "NUL byte (\\u0000) at character 2 of the name 'meta.x\\x00'"),
        ({"answer": "\ud800"}, "answer", "lone surrogate at character 1 of answer"),
        ({"ok": "fine", "list": [1, 2.5, None, True, "text"]}, None, None),
    ],
)
def test_problems_name_their_field_and_path(value, field, words):
    problem = value_problem(value)
    if field is None:
        assert problem is None
    else:
        assert problem is not None and problem.field == field and words in problem.reason


def test_form_fields_are_named_even_when_the_name_is_the_problem():
    assert fields_problem([("q", ["fine"]), ("band", ["in_band"])]) is None
    assert fields_problem([("q", ["fine"]), ("band", ["x\x00"])]).path == "band"
    assert fields_problem([("a\x00", ["x"])]).path == "a\\u0000"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        ("[" * 100_000 + "]" * 100_000, "nests deeper"),
        ('{"a": "\\u0000"}', "NUL byte"),
        ('{"a": "\\udfff"}', "lone surrogate"),
    ],
)
def test_json_text_refuses_with_a_reason(text, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        json_text(text)
    assert json_text('{"kind": "math"}') == {"kind": "math"}
    assert issubclass(input_rules.InputError, ValueError)
