"""Math verifier throughput against calling math-verify directly on the same pairs.

    .venv/bin/python bench/verifiers/math_throughput.py [--pairs 400] [--rounds 3] [--no-write]

Pairs come from GSM8K's test answers (the shared data folder beside the repository, or $PASSBAND_GSM8K) when that file exists:
the worked solution, its final "#### N" line rewritten as a boxed answer, against N (half of the
pairs get a wrong reference so both outcomes are exercised). Without the file, pairs are
generated: fractions, roots, sums, intervals and sets in LaTeX, inside a short chain of thought.

"Direct" is what a trainer would write without Passband: math_verify.parse and .verify in the
calling thread, with math-verify's default (signal.alarm) timeouts, same extraction settings.
"Passband" is verify(kind=math) as it always runs: every comparison in a killable helper process
(math_worker.py). Prints a markdown table and rewrites the "math" section of
docs/benchmarks-verifiers.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import time
from pathlib import Path

# _common puts the repository on sys.path, so it comes before the package imports.
from _common import markdown_table, write_section

from engine.verifiers import verify

# The shared data folder sits beside the repository; it is never part of it.
GSM8K = Path(
    os.environ.get("PASSBAND_GSM8K", Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k" / "test.jsonl")
)


def gsm8k_pairs(limit: int) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(GSM8K.read_text().splitlines()[:limit]):
        solution = json.loads(line)["answer"]
        reasoning, final = solution.rsplit("####", 1)
        final = final.strip().replace(",", "")
        reasoning = re.sub(r"<<[^>]*>>", "", reasoning).strip()
        completion = f"{reasoning}\nThe final answer is $\\boxed{{{final}}}$."
        reference = final if number % 2 == 0 else str(int(float(final)) + 1)
        pairs.append((completion, reference))
    return pairs


def generated_pairs(limit: int) -> list[tuple[str, str]]:
    generator = random.Random(7)
    pairs = []
    for number in range(limit):
        a, b, c = generator.randint(1, 40), generator.randint(2, 40), generator.randint(2, 9)
        shape = number % 5
        if shape == 0:
            stated, reference = f"\\frac{{{a}}}{{{b}}}", f"{a / b:.12g}"
        elif shape == 1:
            stated, reference = f"{c}\\sqrt{{{c}}}", f"\\sqrt{{{c**3}}}"
        elif shape == 2:
            stated, reference = f"{a} + {b}", f"{a + b}"
        elif shape == 3:
            stated, reference = f"[{a}, {a + b})", f"[{a}, {a + b})"
        else:
            stated, reference = f"\\{{{a}, {b}\\}}", f"\\{{{b}, {a}\\}}"
        if number % 2:
            reference = f"{a + b + c}"
        steps = " ".join(f"Step {i}: consider {a} and {b}." for i in range(1, 6))
        pairs.append((f"{steps} Therefore the answer is $\\boxed{{{stated}}}$.", reference))
    return pairs


def direct_verifier():
    """math-verify called the way the math worker calls it, in this thread, default timeouts."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    from math_verify import verify as mv_verify

    extraction = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]

    def check(completion: str, answer: str) -> bool:
        gold = parse(f"${answer}$")
        if not gold:
            gold = parse(answer)
        return mv_verify(gold, parse(completion, extraction_config=extraction))

    return check


def passband_rate(pairs: list[tuple[str, str]], config: dict) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    results = [
        verify(verifier=config, completion=completion, answer=answer).outcome == "pass" for completion, answer in pairs
    ]
    return len(pairs) / (time.perf_counter() - started), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    arguments = parser.parse_args()

    source = "GSM8K test answers (the shared GSM8K test file)" if GSM8K.exists() else "generated LaTeX answers"
    pairs = gsm8k_pairs(arguments.pairs) if GSM8K.exists() else generated_pairs(arguments.pairs)
    direct = direct_verifier()
    config = {"kind": "math"}
    # Warm-up: imports, the helper process, math-verify's caches for a different input.
    direct("$\\boxed{1}$", "1")
    verify(verifier=config, completion="$\\boxed{1}$", answer="1")

    rates: dict[str, list[float]] = {"direct": [], "passband": []}
    agree = 0
    for _ in range(arguments.rounds):
        # Interleaved so that drift in machine load hits both alike.
        started = time.perf_counter()
        direct_results = [direct(completion, answer) for completion, answer in pairs]
        rates["direct"].append(len(pairs) / (time.perf_counter() - started))
        rate, results = passband_rate(pairs, config)
        rates["passband"].append(rate)
        agree = sum(left == right for left, right in zip(direct_results, results, strict=True))
    direct_rate = statistics.median(rates["direct"])
    rate = statistics.median(rates["passband"])
    rows = [
        ["math-verify called directly", f"{direct_rate:.0f}", "-", "-"],
        [
            "passband `verify(kind=math)` (killable helper process)",
            f"{rate:.0f}",
            f"{direct_rate / rate - 1:+.1%}",
            f"{agree}/{len(pairs)}",
        ],
    ]
    table = markdown_table(["variant", "verifications/s", "overhead vs direct", "same verdict as direct"], rows)
    body = (
        "Command: `.venv/bin/python bench/verifiers/math_throughput.py "
        f"--pairs {arguments.pairs} --rounds {arguments.rounds}`\n\n"
        f"Pairs: {len(pairs)} {source}, half with a wrong reference. One calling thread, median of "
        f"{arguments.rounds} interleaved rounds. Direct: `math_verify.parse` + `math_verify.verify` in the "
        "calling thread with their default signal-based timeouts (which only work in a main thread, and "
        "cannot stop a call into C that holds the interpreter). Passband: `verify(kind=math)`, which sends "
        "every comparison to a killable helper process (JSON over a pipe, soft timer there, hard kill from "
        "the caller a second after the deadline; `isolation: auto`, the former in-thread default, is read as "
        "`process`); it works from any thread. The overhead is the price of that hard time bound. A plain "
        "integer reference (every GSM8K one) is read the way math-verify reads it but without its parse, "
        "about half of a comparison's time, so on these pairs Passband can be faster than the direct call.\n\n" + table
    )
    print(table)
    if not arguments.no_write:
        write_section("math", "Math verifier overhead", body)


if __name__ == "__main__":
    main()
