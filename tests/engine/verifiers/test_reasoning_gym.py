"""The reasoning_gym verifier against reasoning-gym's own generators and scorers."""

import json

import pytest
import reasoning_gym
from reasoning_gym.factory import DATASETS

from bench.verifiers.reasoning_gym_sweep import (
    NEEDS_CONFIG,
    NO_REFERENCE,
    PAYS_ANY_ANSWER,
    generator_problems,
    task_of,
    verdict,
    with_reference,
)
from engine.integrations import reasoning_gym_tasks
from engine.integrations.reasoning_gym_tasks import GeneratorError
from engine.verifiers import VerifierConfigError, audit, validate_config
from engine.verifiers.gameability import gameability_check

# A generator of each family of reasoning-gym's registry, their scorers' kinds apart: exact strings, sorted
# lists, numbers with a tolerance, sympy expressions, grids, programs, and the scorer that pays any answer.
# Every generator, by the same check: bench/verifiers/reasoning_gym_sweep.py.
REPRESENTATIVE = (
    "arc_1d",  # arc
    "basic_arithmetic",  # arithmetic
    "bf",  # code
    "coin_flip",  # probability
    "countdown",  # games: an expression the scorer evaluates
    "game_of_life_halting",  # algorithmic: pays any answer
    "knights_knaves",  # logic
    "list_functions",  # induction
    "mini_sudoku",  # games: a grid
    "number_sequence",  # cognition
    "polynomial_multiplication",  # algebra: sympy
    "prime_factorization",  # arithmetic: a scorer that raises on words
    "shortest_path",  # graphs
    "simple_geometry",  # geometry
    "word_sorting",  # algorithmic: a list
)


def test_the_reference_in_answer_tags_passes_and_other_answers_fail():
    task = task_of("basic_arithmetic")
    assert verdict(task, f"Let me work it out.\n<answer>{task['answer']}</answer>").outcome == "pass"
    assert verdict(task, "<answer>123456789</answer>").outcome == "fail"
    assert verdict(task, f"The answer is {task['answer']}.").outcome == "fail"  # no answer tags
    assert verdict(task, "").outcome == "fail"
    # The last answer tag counts, as reasoning-gym's own extract_answer reads it.
    assert verdict(task, f"<answer>0</answer> no wait <answer>{task['answer']}</answer>").outcome == "pass"


def test_partial_credit_does_not_pass_and_the_score_is_kept():
    task = task_of("basic_arithmetic")
    hedge = f"<answer>{task['answer']} or maybe 7</answer>"
    entry = {
        "question": task["prompt"][-1]["content"],
        "answer": task["answer"],
        "metadata": task["verifier"]["metadata"],
    }
    score = reasoning_gym.get_score_answer_fn("basic_arithmetic")(f"{task['answer']} or maybe 7", entry)
    assert 0 < score < 1  # the generator's own scorer pays the hedge in part
    result = verdict(task, hedge)
    assert result.outcome == "fail" and result.reward == 0.0
    assert f"scored {score:.3g}" in result.detail and "partial credit" in result.detail


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_a_generator_with_a_reference_passes_its_own_answer_and_refuses_nonsense(name):
    assert generator_problems(name) == []


def test_every_registered_generator_is_a_valid_config_and_sorted_into_the_sweep():
    """The registry's contract: every generator reasoning-gym registers is a dataset the verifier kind accepts,
    and is swept (bench/verifiers/reasoning_gym_sweep.py) unless it has no single reference answer."""
    for name in DATASETS:
        validate_config({"kind": "reasoning_gym", "dataset": name})
    assert NO_REFERENCE | NEEDS_CONFIG | PAYS_ANY_ANSWER <= set(DATASETS)
    assert set(with_reference()) == set(DATASETS) - NO_REFERENCE - NEEDS_CONFIG
    assert set(REPRESENTATIVE) <= set(with_reference())
    families = {DATASETS[name][0].__module__.split(".")[1] for name in with_reference()}
    assert families == {DATASETS[name][0].__module__.split(".")[1] for name in REPRESENTATIVE}


def findings_of(task):
    task = json.loads(json.dumps(task))
    found = gameability_check(verifier=task["verifier"], answer=task["answer"], prompt=task["prompt"])
    return {finding.label: finding for finding in found}


def test_the_gameability_audit_catches_reasoning_gym_scorers_that_pay_what_they_should_not():
    # Every answer pays: the audit shows "I do not know" earning full reward.
    found = findings_of(task_of("game_of_life_halting"))
    assert found["no answer at all, in answer tags"].completion == "<answer>I do not know</answer>"
    # coin_flip pays a prefix of the reference's digits: "0" for 0.234375.
    task = next(
        task for task in reasoning_gym_tasks.generated_tasks("coin_flip", seed=3, size=5) if task["answer"] != "0"
    )
    assert "the reference cut short, in answer tags" in findings_of(task)
    # sympy-reading scorers evaluate Python's `or`: "0 or <the reference>" is the reference.
    found = findings_of(task_of("polynomial_multiplication"))
    assert found["a hedge: another value or the reference, in answer tags"].outcome == "pass"
    # A sound scorer is not flagged.
    assert findings_of(task_of("basic_arithmetic")) == {}


def test_generators_without_one_reference_fail_the_task_audit():
    task = json.loads(json.dumps(task_of("graph_color")))
    problems = audit(verifier=task["verifier"], answer=task["answer"], prompt=task["prompt"])
    assert any("reference answer does not pass" in problem for problem in problems)


def test_config_errors_name_the_field():
    with pytest.raises(VerifierConfigError, match="^dataset: unknown reasoning-gym generator 'no_such'"):
        validate_config({"kind": "reasoning_gym", "dataset": "no_such"})
    with pytest.raises(VerifierConfigError, match="^extract:"):
        validate_config({"kind": "reasoning_gym", "dataset": "basic_arithmetic", "extract": "boxed"})
    with pytest.raises(VerifierConfigError, match="^dataset:"):
        validate_config({"kind": "reasoning_gym"})


def test_a_scorer_that_raises_is_an_error_not_a_wrong_answer():
    # prime_factorization's scorer int()s each factor and raises on words: that is the scorer's failure,
    # so the rollout is a verifier error (no reward), never a fail the model earned.
    task = task_of("prime_factorization")
    result = verdict(task, "<answer>I do not know</answer>")
    assert result.outcome == "error" and result.reward is None
    assert "score_answer raised ValueError" in result.detail


def test_generation_is_deterministic_and_keys_follow_the_config():
    first = reasoning_gym_tasks.generated_tasks("basic_arithmetic", config={"max_terms": 3}, seed=5, size=3)
    again = reasoning_gym_tasks.generated_tasks("basic_arithmetic", config={"max_terms": 3}, seed=5, size=3)
    other = reasoning_gym_tasks.generated_tasks("basic_arithmetic", config={"max_terms": 4}, seed=5, size=3)
    assert first == again
    assert {task["key"] for task in first}.isdisjoint(task["key"] for task in other)
    origin = first[0]["metadata"]["reasoning_gym"]
    assert origin["generator"] == "basic_arithmetic" and origin["seed"] == 5 and origin["config"]["max_terms"] == 3


def test_generator_errors_say_what_is_wrong():
    with pytest.raises(GeneratorError, match="unknown reasoning-gym generator 'nope'"):
        reasoning_gym_tasks.generated_tasks("nope", size=1)
    with pytest.raises(GeneratorError, match="refused config"):
        reasoning_gym_tasks.generated_tasks("basic_arithmetic", config={"min_terms": 5, "max_terms": 2}, size=1)
    with pytest.raises(GeneratorError, match="no attribute 'colour'"):
        reasoning_gym_tasks.curriculum_levels("basic_arithmetic", ["colour"])


def test_a_sweep_walks_each_attribute_through_the_curriculums_own_levels():
    from reasoning_gym.factory import create_curriculum

    attributes = create_curriculum("basic_arithmetic").attributes
    points = reasoning_gym_tasks.curriculum_levels("basic_arithmetic")
    assert [(p["attribute"], p["value"]) for p in points] == [
        (name, value) for name, attribute in attributes.items() for value in attribute.levels
    ]
    digits = [p for p in points if p["attribute"] == "num_digits"]
    assert [(p["config"]["min_digits"], p["config"]["max_digits"]) for p in digits] == [(v, v) for v in (1, 2, 3, 4)]
    # The other attribute stays at its default level.
    assert {p["config"]["max_terms"] for p in digits} == {attributes["num_terms"].levels[0]}

    tasks = reasoning_gym_tasks.curriculum_tasks("basic_arithmetic", size_per_level=2)
    assert len({task["key"] for task in tasks}) == len(tasks)
    report = reasoning_gym_tasks.curriculum_report((task["metadata"], 0, 0, None) for task in tasks)
    assert [(row["attribute"], row["level"]) for row in report] == sorted((p["attribute"], p["level"]) for p in points)
    assert all(row["tasks"] == 2 and row["pass_rate"] is None for row in report)


def test_the_report_pools_attempts_per_level():
    tasks = reasoning_gym_tasks.curriculum_tasks("basic_arithmetic", size_per_level=2, attributes=["num_terms"])
    rows = [
        (task["metadata"], index % 2, 4, "in_band" if index % 2 else "too_hard") for index, task in enumerate(tasks)
    ]
    report = reasoning_gym_tasks.curriculum_report(rows)
    assert len(report) == 5
    for row in report:
        assert row["tasks"] == row["probed"] == 2 and row["attempts"] == 8 and row["successes"] == 1
        assert row["pass_rate"] == pytest.approx(1 / 8) and row["bands"] == {"in_band": 1, "too_hard": 1}


def test_an_answer_that_a_scorer_evaluates_cannot_act_on_the_host(tmp_path):
    # countdown's scorer calls sympy's parse_expr on the answer, which evaluates it as Python.
    task = task_of("countdown")
    marker = tmp_path / "ran"
    attacks = [
        f"__import__('os').system('touch {marker}')",
        f"__import__('subprocess').run(['touch', '{marker}'])",
        f"open('{marker}', 'w').write('x')",
        "__import__('socket').create_connection(('127.0.0.1', 5432))",
        "__import__('ctypes').CDLL(None)",
    ]
    for attack in attacks:
        assert verdict(task, f"<answer>{attack}</answer>").outcome in ("fail", "error"), attack
    assert not marker.exists()
    # The helper still scores afterwards.
    assert verdict(task, f"<answer>{task['answer']}</answer>").outcome == "pass"
