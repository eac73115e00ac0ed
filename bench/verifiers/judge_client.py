"""llm_judge: the cost of an HTTP client per judge call against one client per process.

Runs N judge calls (verify with an llm_judge config) against the suite's OpenAI-compatible test server
(tests/support/openai_server.py, an instant judge) twice in the same run: with a fresh httpx client per call
(httpx.post, the code before the shared client) and with the shared client llm_judge now uses. Prints the
median and total per mode.

    PYTHONPATH=$PWD .venv/bin/python bench/verifiers/judge_client.py --calls 200
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from engine.verifiers import configure, verify
from engine.verifiers.kinds import llm_judge
from tests.support.openai_server import OpenAITestServer

CONFIG = {"kind": "llm_judge", "judge": "bench", "rubric": "Pass a correct answer.", "max_tokens": 16}


def timed(calls: int) -> list[float]:
    times = []
    for index in range(calls):
        start = time.perf_counter()
        verdict = verify(verifier=CONFIG, completion=f"answer {index}", answer="42", prompt="What is 6 * 7?")
        times.append(time.perf_counter() - start)
        assert verdict.outcome == "pass", verdict
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with OpenAITestServer(respond=lambda prompt, seed: "VERDICT: PASS") as server:
        configure(judges={"bench": {"base_url": server.base_url, "model": "fake"}})
        shared = llm_judge._client
        for mode in ("client per call", "shared client", "client per call", "shared client"):
            llm_judge._client = httpx.Client if mode == "client per call" else shared
            times = timed(args.calls)
            print(f"{mode:16} median {statistics.median(times) * 1000:7.1f} ms  total {sum(times):6.2f} s")
        llm_judge._client = shared


if __name__ == "__main__":
    main()
