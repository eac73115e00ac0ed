"""Column mappings: templates, answer extractors, keys, metadata, and errors that name the file, row and field."""

import datetime
from decimal import Decimal

import pytest

from engine import task_files
from engine.task_format import validate_task_object
from engine.task_mapping import ColumnMapping, MappingError, extract_answer, suggest_mapping, template_columns
from engine.task_sources import TaskSource
from tests.factories import gsm8k_rows, jsonl, write_parquet

GSM8K = ColumnMapping(prompt="Solve: {question}", answer_column="answer", answer_extractor="after_hashes")
OPTIONS = dict(default_verifier={"kind": "math"}, default_domain="math", max_line_bytes=1 << 20)


@pytest.mark.parametrize(
    "extractor, pattern, text, expected",
    [
        ("none", "", "  42 \n", "42"),
        ("after_hashes", "", "3 + 4 = <<3+4=7>>7\n#### 7", "7"),
        ("after_hashes", "", "#### 1\nthen again\n#### 1,234 ", "1,234"),
        ("last_boxed", "", r"so \boxed{1} no, \boxed{\frac{1}{2}}.", r"\frac{1}{2}"),
        ("regex", r"answer is (\d+)", "The answer is 12.", "12"),
        ("regex", r"\d+", "about 99 of them", "99"),
    ],
)
def test_extractors_find_the_final_answer(extractor, pattern, text, expected):
    assert extract_answer(text, extractor=extractor, pattern=pattern) == expected


@pytest.mark.parametrize(
    "extractor, pattern, text, reason",
    [
        ("after_hashes", "", "no marker", "no '####'"),
        ("after_hashes", "", "#### ", "nothing after"),
        ("last_boxed", "", "plain 4", "no \\boxed"),
        ("regex", r"answer is (\d+)", "no number", "does not match"),
    ],
)
def test_extractors_say_why_there_is_no_answer(extractor, pattern, text, reason):
    with pytest.raises(ValueError, match=reason.replace("\\", "\\\\")):
        extract_answer(text, extractor=extractor, pattern=pattern)


def test_a_gsm8k_row_becomes_a_task_in_passbands_format():
    row = gsm8k_rows(1)[0] | {"id": 17, "level": Decimal("2.5"), "when": datetime.date(2021, 10, 1)}
    mapping = ColumnMapping(
        prompt="Solve: {question} {{show work}}",
        answer_column="answer",
        answer_extractor="after_hashes",
        key_column="id",
        key_prefix="gsm8k/test/",
        metadata_columns=("level", "when"),
        verifier={"kind": "numeric"},
    )
    task, problems = mapping.task_object(row, number=1, filename="g.parquet", unit="row")
    assert problems == []
    assert task == {
        "prompt": "Solve: " + row["question"] + " {show work}",
        "answer": "4",
        "key": "gsm8k/test/17",
        "metadata": {"level": "2.5", "when": "2021-10-01"},
        "verifier": {"kind": "numeric"},
    }


def test_a_column_of_chat_messages_is_the_prompt_as_it_is():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}]
    task, _ = ColumnMapping(prompt="{messages}").task_object({"messages": messages}, number=1, filename="m.jsonl")
    assert task == {"prompt": messages}


@pytest.mark.parametrize(
    "fields, field, reason",
    [
        ({"prompt": "Solve: {question"}, "prompt", "lone '{'"),
        ({"prompt": "Solve: {}"}, "prompt", "empty {}"),
        ({"prompt": "no columns"}, "prompt", "names no column"),
        ({"prompt": "{q}", "answer_extractor": "last_line"}, "answer_extractor", "must be one of"),
        ({"prompt": "{q}", "answer_extractor": "after_hashes"}, "answer_extractor", "needs an answer column"),
        (
            {"prompt": "{q}", "answer_column": "a", "answer_extractor": "regex", "answer_pattern": r"(\d)\1"},
            "answer_pattern",
            "RE2",
        ),
        ({"prompt": "{q}", "verifier": {"kind": "telepathy"}}, "verifier", "telepathy"),
        ({"prompt": "{q}", "key_prefix": "x/"}, "key_prefix", "needs a key column"),
        ({"prompt": "{q}", "answer": "a"}, "answer", "not a mapping field"),
        ({"prompt": "{q}", "metadata_columns": "level"}, "metadata_columns", "list of column names"),
    ],
)
def test_a_bad_mapping_names_its_field(fields, field, reason):
    with pytest.raises(MappingError, match=reason) as caught:
        ColumnMapping.from_dict(fields)
    assert caught.value.field == field


def test_a_level_column_becomes_the_declared_difficulty_and_a_bad_cell_is_named_by_its_column():
    """MATH labels its problems "Level 1" to "Level 5"; a number or a word works too."""
    mapping = ColumnMapping(prompt="{problem}", answer_column="solution", difficulty_column="level")
    cells = ["Level 3", 4, "hard", None, ""]
    tasks = [
        mapping.task_object({"problem": "p", "solution": "1", "level": cell}, number=1, filename="m.parquet")[0]
        for cell in cells
    ]
    assert [task["difficulty"] for task in tasks] == [3.0, 4.0, 3.0, None, None]
    draft, problems = validate_task_object(
        tasks[0], filename="m.parquet", line=1, default_verifier={"kind": "math"}, default_domain="math"
    )
    assert problems == [] and draft is not None and draft.difficulty == 3.0
    task, problems = mapping.task_object(
        {"problem": "p", "solution": "1", "level": "Level 3 of 5"}, number=7, filename="m.parquet", unit="row"
    )
    assert task is None and [(p.line, p.field) for p in problems] == [(7, "level")]
    assert "declared difficulty" in problems[0].reason
    assert ColumnMapping.from_dict(mapping.as_dict()) == mapping


def test_a_mapping_survives_its_stored_form():
    assert ColumnMapping.from_dict(GSM8K.as_dict()) == GSM8K
    assert template_columns("{a} and {b c}{{x}}") == ["a", "b c"]


def test_columns_the_file_lacks_are_named_before_any_row_is_read(tmp_path):
    write_parquet(tmp_path / "g.parquet", gsm8k_rows(3))
    mapping = ColumnMapping(prompt="{questoin}", answer_column="answer", key_column="id")
    scan = task_files.scan_task_file(
        TaskSource(filename="g.parquet", path=tmp_path / "g.parquet"), mapping=mapping, **OPTIONS
    )
    assert [(p.line, p.field) for p in scan.problems] == [(0, "mapping: prompt"), (0, "mapping: key_column")]
    assert str(scan.problems[0]) == (
        "g.parquet, field 'mapping: prompt': the file has no column 'questoin'; its columns: question, answer"
    )


def test_bad_rows_are_named_by_row_and_column_and_nothing_is_kept(tmp_path):
    rows = gsm8k_rows(6)
    rows[2]["answer"] = "forgot the marker"
    rows[4]["question"] = None
    write_parquet(tmp_path / "g.parquet", rows)
    scan = task_files.scan_task_file(
        TaskSource(filename="g.parquet", path=tmp_path / "g.parquet"), mapping=GSM8K, **OPTIONS
    )
    assert [str(problem) for problem in scan.problems] == [
        "g.parquet, row 3, field 'answer': has no '####' before a final answer (the extractor is 'text after ####')",
        "g.parquet, row 5, field 'question': is empty",
    ]


def test_mapped_keys_must_be_valid_and_unique(tmp_path):
    rows = [row | {"id": ident} for row, ident in zip(gsm8k_rows(3), ["a b", "x", "x"])]
    mapping = ColumnMapping(prompt="{question}", key_column="id")
    scan = task_files.scan_task_file(TaskSource(filename="k.jsonl", data=jsonl(*rows)), mapping=mapping, **OPTIONS)
    assert [(p.line, p.field) for p in scan.problems] == [(1, "key"), (3, "key")]
    assert "already used on line 2" in scan.problems[1].reason


def test_the_row_number_makes_a_stable_key_and_the_answer_goes_through_the_audit_shape(tmp_path):
    write_parquet(tmp_path / "g.parquet", gsm8k_rows(2))
    mapping = ColumnMapping(
        prompt="{question}",
        answer_column="answer",
        answer_extractor="after_hashes",
        key_column="#row",
        key_prefix="gsm8k-",
    )
    drafts, problems = task_files.parse_task_file(
        (tmp_path / "g.parquet").read_bytes(), filename="g.parquet", max_file_bytes=1 << 30, mapping=mapping, **OPTIONS
    )
    assert problems == [] and [(d.key, d.answer, d.verifier) for d in drafts] == [
        ("gsm8k-1", "4", {"kind": "math"}),
        ("gsm8k-2", "7", {"kind": "math"}),
    ]


def test_passband_format_parquet_imports_without_a_mapping(tmp_path):
    rows = [{"key": "p-1", "prompt": "1+1?", "answer": "2", "verifier": '{"kind": "exact"}', "metadata": None}]
    write_parquet(tmp_path / "native.parquet", rows)
    drafts, problems = task_files.parse_task_file(
        (tmp_path / "native.parquet").read_bytes(), filename="native.parquet", max_file_bytes=1 << 30, **OPTIONS
    )
    assert problems == [] and drafts[0].verifier == {"kind": "exact"} and drafts[0].metadata == {}


def test_a_first_guess_from_the_column_names():
    guess = suggest_mapping(["id", "question", "answer"], gsm8k_rows(1)[0])
    assert guess["prompt"] == "{question}" and guess["answer_column"] == "answer"
    assert guess["answer_extractor"] == "after_hashes" and guess["key_column"] == "id"
    assert ColumnMapping.from_dict(guess).answer_extractor == "after_hashes"
