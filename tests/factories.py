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
