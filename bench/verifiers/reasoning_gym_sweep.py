"""Sweep: every reasoning-gym generator with a single reference answer through the reasoning_gym verifier.
For each, two generated tasks: the reference in answer tags must pass, "I do not know" must not (an error is
allowed: some scorers raise on words; never a timeout), an empty completion must fail. The suite checks a
representative generator per family with these functions (tests/engine/verifiers/test_reasoning_gym.py); this
runs them all.

    .venv/bin/python bench/verifiers/reasoning_gym_sweep.py [--generators N]

Prints each generator that broke the rule and the count that kept it; exits 1 if any broke it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reasoning_gym.factory import DATASETS  # noqa: E402

from engine.integrations import reasoning_gym_tasks  # noqa: E402
from engine.verifiers import verify  # noqa: E402

# Generators whose tasks have no single reference answer (any valid solution scores 1, so there is nothing to
# put in a task's answer) or whose metadata does not survive JSON (numpy grids): the task audit refuses their
# tasks at import (tests/engine/verifiers/test_reasoning_gym.py shows it).
NO_REFERENCE = {"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour", "arc_agi", "rearc"}
NEEDS_CONFIG = {"composite"}
# game_of_life_halting's scorer compares bool(answer) with bool(reference): every non-empty answer pays.
PAYS_ANY_ANSWER = {"game_of_life_halting"}


def with_reference() -> list[str]:
    """The generators the sweep covers: every registered one with a single reference answer."""
    return sorted(set(DATASETS) - NO_REFERENCE - NEEDS_CONFIG)


def task_of(name: str, seed: int = 3, index: int = 0, **config) -> dict:
    return reasoning_gym_tasks.generated_tasks(name, config=config, seed=seed, size=index + 1)[index]


def verdict(task: dict, completion: str):
    # The row as stored: everything through JSON, as the probe, the API and a trainer read it.
    task = json.loads(json.dumps(task))
    return verify(verifier=task["verifier"], completion=completion, answer=task["answer"], prompt=task["prompt"])


def generator_problems(name: str, *, tasks: int = 2) -> list[str]:
    """What `name`'s first `tasks` tasks got wrong: their reference refused, nonsense paid or timed out, or an
    empty completion not failed. [] when the generator keeps the rule."""
    problems = []
    for index in range(tasks):
        task = task_of(name, index=index)
        if (outcome := verdict(task, f"<answer>{task['answer']}</answer>").outcome) != "pass":
            problems.append(f"{name}[{index}]: the reference answer got {outcome}")
        nonsense = verdict(task, "<answer>I do not know</answer>").outcome
        if (nonsense == "pass") != (name in PAYS_ANY_ANSWER) or nonsense == "timeout":
            problems.append(f"{name}[{index}]: 'I do not know' got {nonsense}")
        if (outcome := verdict(task, "").outcome) != "fail":
            problems.append(f"{name}[{index}]: an empty completion got {outcome}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generators", type=int, default=None, help="the first N generators (default: all)")
    options = parser.parse_args()
    names = with_reference()[: options.generators]
    started = time.perf_counter()
    problems = [problem for name in names for problem in generator_problems(name)]
    seconds = time.perf_counter() - started
    for problem in problems:
        print(problem)
    broken = len({problem.split("[")[0] for problem in problems})
    print(
        f"{len(names) - broken} of {len(names)} generators keep the rule ({len(DATASETS)} registered), {seconds:.1f} s"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
