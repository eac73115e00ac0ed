"""Real-server benchmark: Passband's workers against a plain client, on one llama.cpp server.

One run, one server (llama-server serving SmolLM2-135M on the CPU, scripts/llama-server.sh), the
same requests: first a plain client (httpx in a thread pool) sends every rollout's request at each
concurrency in --concurrency and keeps the best; then a campaign of the same tasks, seeds and sampling
goes through a real Celery worker (generate, store, verify, calibrate) with the probe model's
max concurrency at that best value. Last, the in-process transformers backend samples a share of the
same rollouts on the same CPU, with the server stopped (it would compete for the cores).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \
        .venv/bin/python bench/real_server.py --tasks 16 --rollouts 8 --max-new-tokens 48

Goal: Passband's rollouts/s at least 90% of the plain client's (orchestration never the bottleneck).
It works in its own database (<name>_bench), created afresh each run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import campaign_until_done, django_in_fresh_database, exact_match_environment  # noqa: E402

PORT = 8093


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--rollouts", type=int, default=8, help="Rollouts per task.")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--transformers-share", type=int, default=4, help="Tasks the in-process model samples.")
    args = parser.parse_args()

    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
    os.environ["PASSBAND_TASKS_PER_JOB"] = "4"
    django_in_fresh_database(suffix="_bench")
    import redis
    from django.conf import settings

    from calibration import services
    from calibration.models import Rollout
    from engine import backends
    from tests.support.workers import worker_command

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    user, environment = exact_match_environment(tasks=args.tasks, verifier={"kind": "exact"})
    versions = [task.current_version for task in environment.tasks.select_related("current_version").order_by("pk")]
    campaign_seed = 1
    seeds = {
        version.pk: [
            backends.rollout_seed(campaign_seed=campaign_seed, task_version_hash=version.content_hash, sample_index=i)
            for i in range(args.rollouts)
        ]
        for version in versions
    }
    server = start_server(slots=max(args.concurrency))
    url = f"http://127.0.0.1:{PORT}"
    try:
        plain = {
            concurrency: plain_client(url=url, versions=versions, seeds=seeds, args=args, concurrency=concurrency)
            for concurrency in args.concurrency
        }
        best = max(plain, key=lambda concurrency: plain[concurrency][0])
        model = services.probe_model_add(
            name="llama-bench",
            backend="openai",
            server="llama.cpp",
            base_url=f"{url}/v1",
            model="smollm2",
            temperature=1.0,
            max_new_tokens=args.max_new_tokens,
            max_concurrency=best,
        )
        worker = subprocess.Popen(
            worker_command(queues="default,generate,verify", concurrency=2, name="bench", loglevel="WARNING"),
            cwd=ROOT,
            env=os.environ.copy(),
        )
        try:
            time.sleep(6)  # start-up is not what is measured
            campaign, elapsed = campaign_until_done(
                environment=environment,
                probe_model=model,
                user=user,
                rollouts=args.rollouts,
                round_size=args.rollouts,
                seed=campaign_seed,
                timeout_s=1800,
            )
        finally:
            worker.terminate()
            worker.wait(timeout=60)
        rollouts = Rollout.objects.filter(campaign=campaign)
        stored = rollouts.count()
        tokens = sum(rollouts.values_list("output_tokens", flat=True))
        exact = rollouts.filter(capture="exact").count()
    finally:
        server.terminate()
        server.wait(timeout=30)
    transformers_rate, transformers_tokens = in_process(
        versions=versions[: args.transformers_share], seeds=seeds, args=args
    )

    print(f"{args.tasks} tasks × {args.rollouts} rollouts, at most {args.max_new_tokens} new tokens, temperature 1.0")
    print("| path | concurrency | rollouts/s | completion tokens/s | vs best plain client |")
    print("|---|---:|---:|---:|---:|")
    best_rate = plain[best][0]
    for concurrency, (rate, token_rate) in plain.items():
        print(f"| plain client (httpx) | {concurrency} | {rate:.2f} | {token_rate:.0f} | {rate / best_rate:.0%} |")
    print(
        f"| Passband worker (generate, store, verify, calibrate) | {best} | {stored / elapsed:.2f} | {tokens / elapsed:.0f} "
        f"| {stored / elapsed / best_rate:.0%} |"
    )
    print(
        f"| in-process transformers (same model, fp32 on the CPU, server stopped) | batch | {transformers_rate:.2f} "
        f"| {transformers_tokens:.0f} | {transformers_rate / best_rate:.0%} |"
    )
    print(f"stored {stored} rollouts, {exact} with exact capture")


def start_server(*, slots: int) -> subprocess.Popen:
    import httpx

    binary = subprocess.run(["bash", "scripts/llama-server.sh", "binary"], cwd=ROOT, capture_output=True, text=True)
    model = subprocess.run(["bash", "scripts/llama-server.sh", "model"], cwd=ROOT, capture_output=True, text=True)
    command = [binary.stdout.strip().splitlines()[-1], "-m", model.stdout.strip(), "--host", "127.0.0.1"]
    command += ["--port", str(PORT), "-c", str(2048 * slots), "-np", str(slots), "-t", "2", "--no-webui", "--no-repack"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(120):
        try:
            if httpx.get(f"http://127.0.0.1:{PORT}/health", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("llama-server did not start")


def plain_client(*, url: str, versions, seeds, args, concurrency: int) -> tuple[float, float]:
    """Every rollout's request, as Passband sends it, from a thread pool: (rollouts/s, tokens/s)."""
    import httpx

    from engine.backends.openai_servers import profile_for

    fields = profile_for("llama.cpp").chat_fields
    bodies = [
        {
            "model": "smollm2",
            "messages": version.prompt,
            "seed": seed,
            "n": 1,
            "temperature": 1.0,
            "top_p": 0.95,
            "max_tokens": args.max_new_tokens,
            "logprobs": True,
            **fields,
        }
        for version in versions
        for seed in seeds[version.pk]
    ]
    with httpx.Client(timeout=300, limits=httpx.Limits(max_connections=concurrency)) as client:

        def send(body: dict) -> int:
            response = client.post(f"{url}/v1/chat/completions", json=body)
            response.raise_for_status()
            return response.json()["usage"]["completion_tokens"]

        send(bodies[0])  # warm up
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            tokens = sum(pool.map(send, bodies))
        elapsed = time.perf_counter() - started
    return len(bodies) / elapsed, tokens / elapsed


def in_process(*, versions, seeds, args) -> tuple[float, float]:
    from engine.backends import BackendOptions, SamplingParams, backend_for

    backend = backend_for(BackendOptions(kind="transformers"))
    params = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=args.max_new_tokens)
    backend.generate(messages=versions[0].prompt, seeds=[0], params=params)  # load and warm up
    started = time.perf_counter()
    generations = [
        g
        for version in versions
        for g in backend.generate(messages=version.prompt, seeds=seeds[version.pk], params=params)
    ]
    elapsed = time.perf_counter() - started
    return len(generations) / elapsed, sum(g.output_tokens or 0 for g in generations) / elapsed


if __name__ == "__main__":
    main()
