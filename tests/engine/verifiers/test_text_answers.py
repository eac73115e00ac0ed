"""Text answers must commit to the right value: the battery in data/text_answers.json (right answers in
legitimate forms, negations, hedges, unworked expressions, units and percents, with and without the
prompt), each with the verdict it must get and why. tests/engine/integrations/test_text_answer_paths.py
runs the same battery through every other scoring path."""

import json
from pathlib import Path

import pytest

from engine.verifiers import verify

BATTERY = json.loads((Path(__file__).parent / "data" / "text_answers.json").read_text())["completions"]


def test_the_battery_covers_every_kind_of_answer():
    assert len(BATTERY) >= 60
    assert {row["verdict"] for row in BATTERY} == {"pass", "fail"}
    assert any(row["prompt"] is None for row in BATTERY) and all(row["reason"] for row in BATTERY)


@pytest.mark.parametrize(
    "row", BATTERY, ids=[f"{row['task']}:{row['completion']}:{row['verifier']}" for row in BATTERY]
)
def test_the_engine_gives_the_expected_verdict(row):
    verdict = verify(verifier=row["verifier"], completion=row["completion"], answer=row["answer"], prompt=row["prompt"])
    assert verdict.outcome == row["verdict"], f"{row['reason']}: {verdict.detail}"
