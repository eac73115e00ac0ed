"""Benchmark the openai backend against the OpenAI-compatible test server: rollouts per second.

The server (tests/support/openai_server.py) runs in a separate process, as a model server would, and
answers at once, so the figure is the ceiling of the HTTP path: client, JSON, and the test server
itself. It tells a pipeline benchmark how many rollouts per second this path can feed.

Run from the repository root:

    .venv/bin/python bench/backends/openai_test_server.py --rollouts 3000 --concurrency 8 32 --samples-per-request 1 16

The seeds are consecutive, as a task's are, so with `--samples-per-request 16` they go out as
requests with n=16 (see engine/backends/openai_backend.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY_ROOT))

from engine.backends import SamplingParams  # noqa: E402
from engine.backends.openai_backend import OpenAIBackend  # noqa: E402

MESSAGES = [{"role": "user", "content": "What is 2 + 3?"}]


def serve_forever(base_urls: multiprocessing.Queue) -> None:
    """Child process: run the test server until terminated, after posting its base URL."""
    sys.path.insert(0, str(REPOSITORY_ROOT))
    from tests.support.openai_server import OpenAITestServer

    server = OpenAITestServer(record_requests=False).start()
    base_urls.put(server.base_url)
    while True:
        time.sleep(3600)


def rollouts_per_second(
    *, base_url: str, rollouts: int, concurrency: int, new_tokens: int, samples_per_request: int
) -> tuple[float, int]:
    """Send `rollouts` seeds through one backend; returns (rollouts per second, errors)."""
    backend = OpenAIBackend(
        base_url=base_url, model="fake-model", max_concurrency=concurrency, samples_per_request=samples_per_request
    )
    params = SamplingParams(max_new_tokens=new_tokens)
    try:
        backend.generate(messages=MESSAGES, seeds=list(range(100)), params=params)  # open the connections
        started = time.perf_counter()
        generations = backend.generate(messages=MESSAGES, seeds=list(range(rollouts)), params=params)
        elapsed = time.perf_counter() - started
    finally:
        backend.close()
    return rollouts / elapsed, sum(generation.finish_reason == "error" for generation in generations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--samples-per-request", type=int, nargs="+", default=[1, 16])
    arguments = parser.parse_args()

    base_urls: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve_forever, args=(base_urls,), daemon=True)
    server.start()
    try:
        base_url = base_urls.get(timeout=30)
        print("| samples per request | concurrency | rollouts/s | errors |")
        print("|---:|---:|---:|---:|")
        for samples_per_request in arguments.samples_per_request:
            for concurrency in arguments.concurrency:
                rate, errors = rollouts_per_second(
                    base_url=base_url,
                    rollouts=arguments.rollouts,
                    concurrency=concurrency,
                    new_tokens=arguments.new_tokens,
                    samples_per_request=samples_per_request,
                )
                print(f"| {samples_per_request} | {concurrency} | {rate:.0f} | {errors} |")
    finally:
        server.terminate()
        server.join()


if __name__ == "__main__":
    main()
