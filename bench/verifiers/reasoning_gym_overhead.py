"""The reasoning_gym verifier against the generator's score_answer called directly.

Passband scores every answer in a locked-down helper process (engine/verifiers/reasoning_gym_worker.py):
this measures what that costs per verification, on generated tasks of a few generators, with the
reference answer and a wrong one alternating, after one warm-up call per generator (the helper's
start, about two seconds of importing reasoning-gym, is paid once per worker process).

    .venv/bin/python bench/verifiers/reasoning_gym_overhead.py --tasks 200 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.integrations.reasoning_gym_tasks import generated_tasks  # noqa: E402
from engine.verifiers import verify  # noqa: E402
from engine.verifiers.kinds.reasoning_gym import extract_answer, question_text  # noqa: E402

GENERATORS = ("basic_arithmetic", "countdown", "polynomial_multiplication", "word_sorting")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per generator")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    import reasoning_gym

    cases = []
    for name in GENERATORS:
        for index, task in enumerate(json.loads(json.dumps(generated_tasks(name, seed=1, size=options.tasks)))):
            completion = f"<answer>{task['answer'] if index % 2 == 0 else 'no idea'}</answer>"
            cases.append((name, task, completion))
        verify(verifier=cases[-1][1]["verifier"], completion="<answer>x</answer>", answer="x")  # warm-up
    scorers = {name: reasoning_gym.get_score_answer_fn(name) for name in GENERATORS}

    def passband() -> None:
        for _, task, completion in cases:
            verify(verifier=task["verifier"], completion=completion, answer=task["answer"], prompt=task["prompt"])

    def direct() -> None:
        for name, task, completion in cases:
            entry = {"question": question_text(task["prompt"]), "answer": task["answer"]}
            entry["metadata"] = task["verifier"]["metadata"]
            scorers[name](extract_answer(completion, "answer_tag"), entry)

    results = {"passband": [], "direct": []}
    for _ in range(options.rounds):
        for label, run in (("passband", passband), ("direct", direct)):
            started = time.perf_counter()
            run()
            results[label].append(len(cases) / (time.perf_counter() - started))
    for label, rates in results.items():
        print(
            f"{label}: {statistics.median(rates):,.0f} verifications/s median, worst {min(rates):,.0f} ({len(cases)} a round)"
        )
    print(
        f"per verification, Passband adds {1e6 / statistics.median(results['passband']) - 1e6 / statistics.median(results['direct']):,.0f} µs"
    )


if __name__ == "__main__":
    main()
