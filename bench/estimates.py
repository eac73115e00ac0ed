"""Estimate benchmark: how often a first probe's stated range holds the actual time and cost, the second
campaign's estimate error, and the rate and time-left error once a tenth of the rollouts is stored.

Each run registers a new probe model on an OpenAI-compatible test server slowed to a known rate (a fixed
seconds per request, answers of about `--mean-tokens` tokens), probes an environment with it (the first
estimate: no measured speed), then probes it again (the second estimate: measured here). Campaigns run
in this process (campaign_run_inline: the same rounds the workers run), on a SQLite file in a temporary
folder, so it fits 2 cores.

    .venv/bin/python bench/estimates.py --runs 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LATENCIES = (0.05, 0.1, 0.2, 0.3, 0.5)  # seconds per request: the servers' known rates, cycled


def _campaign(services, selectors, *, environment, model, user, tasks: int, rollouts: int) -> dict:
    """Run one fixed campaign inline; its actual seconds and cost, and the rate and time left it showed
    once a tenth of its rollouts was stored (with the seconds actually left then)."""
    estimate = selectors.probe_estimate(
        probe_model=model, tasks=tasks, rollouts=rollouts, max_new_tokens=model.max_new_tokens
    )
    campaign = services.campaign_start(
        environment=environment, probe_model=model, created_by=user, rollouts=rollouts, round_size=rollouts,
        enqueue=False,
    )  # fmt: skip
    started = time.monotonic()
    seen: dict = {}

    def progress(done: int, total: int) -> None:
        if "eta" in seen:
            return
        shown = selectors.campaign_progress(campaign=campaign)
        if shown["stored"] >= tasks * rollouts / 10 and shown["rollouts_per_minute"] is not None:
            seen.update(at=time.monotonic(), eta=shown["eta_seconds"], rate=shown["rollouts_per_minute"],
                        stored=shown["stored"])  # fmt: skip

    services.campaign_run_inline(campaign=campaign, progress=progress)
    finished = time.monotonic()
    actual = selectors.campaign_progress(campaign=campaign)
    result = {"estimate": estimate, "seconds": finished - started, "cost": actual["cost"]}
    if "eta" in seen:
        left = finished - seen["at"]
        result["eta_error"] = abs(seen["eta"] - left) / left
        result["rate_error"] = abs(seen["rate"] - 60 * (actual["stored"] - seen["stored"]) / left) / (
            60 * (actual["stored"] - seen["stored"]) / left
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--budget", type=int, default=48, help="max new tokens per rollout")
    parser.add_argument("--eos", type=float, default=0.04, help="the server's chance of ending an answer per token")
    args = parser.parse_args()

    os.environ.update(DJANGO_SETTINGS_MODULE="passband.settings", LOG_LEVEL="WARNING")
    os.environ.setdefault("SECRET_KEY", "passband-bench-only")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["PASSBAND_VAR_DIR"] = tempfile.mkdtemp(prefix="passband-estimates-")

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from calibration import selectors, services
    from curation.services import environment_create
    from tests.factories import import_tasks
    from tests.support.openai_server import serve_openai

    user = get_user_model().objects.create_user("bench", is_staff=True)
    rows = []
    for run in range(args.runs):
        latency = LATENCIES[run % len(LATENCIES)]
        environment = environment_create(name=f"bench-{run}", domain="math", default_verifier={"kind": "exact"})
        import_tasks(
            environment, user,
            *[{"key": f"t{i}", "prompt": f"Say {i} + {run}", "answer": str(i + run), "verifier": {"kind": "exact"}}
              for i in range(args.tasks)],
        )  # fmt: skip
        with serve_openai(latency_s=latency, eos_probability=args.eos, record_requests=False) as base_url:
            model = services.probe_model_add(
                name=f"server-{run}", backend="openai", base_url=base_url, model="fake-model",
                max_new_tokens=args.budget, usd_per_gpu_hour=2.0, usd_per_million_output_tokens=10,
            )  # fmt: skip
            kwargs = {"environment": environment, "model": model, "user": user, "tasks": args.tasks,
                      "rollouts": args.rollouts}  # fmt: skip
            first = _campaign(services, selectors, **kwargs)
            second = _campaign(services, selectors, **kwargs)
        low_s, high_s = first["estimate"]["seconds_range"]
        low_c, high_c = first["estimate"]["cost_range"]
        rows.append(
            {
                "latency": latency,
                "first_seconds": first["seconds"],
                "first_range_s": (low_s, high_s),
                "time_held": low_s <= first["seconds"] <= high_s,
                "first_cost": first["cost"],
                "cost_held": low_c <= first["cost"] <= high_c,
                "second_time_error": abs(second["estimate"]["seconds"] - second["seconds"]) / second["seconds"],
                "second_cost_error": abs(second["estimate"]["cost_usd"] - second["cost"]) / second["cost"],
                "eta_error": [r["eta_error"] for r in (first, second) if "eta_error" in r],
                "rate_error": [r["rate_error"] for r in (first, second) if "rate_error" in r],
            }
        )
        row = rows[-1]
        print(
            f"run {run}: {latency:.2f} s/request · first {row['first_seconds']:.1f} s in "
            f"[{low_s:.1f}, {high_s:.1f}] {'held' if row['time_held'] else 'MISSED'}, ${row['first_cost']:.5f} in "
            f"[{low_c:.5f}, {high_c:.5f}] {'held' if row['cost_held'] else 'MISSED'} · second: time error "
            f"{100 * row['second_time_error']:.0f}%, cost error {100 * row['second_cost_error']:.0f}% · at a tenth: "
            f"time-left error {', '.join(f'{100 * e:.0f}%' for e in row['eta_error']) or 'unknown'}, rate error "
            f"{', '.join(f'{100 * e:.0f}%' for e in row['rate_error']) or 'unknown'}"
        )
    etas = [error for row in rows for error in row["eta_error"]]
    rates = [error for row in rows for error in row["rate_error"]]
    print(
        f"\nfirst estimate's range held the time in {sum(r['time_held'] for r in rows)}/{len(rows)} runs and the cost "
        f"in {sum(r['cost_held'] for r in rows)}/{len(rows)}; second campaign's estimate error: time median "
        f"{100 * statistics.median(r['second_time_error'] for r in rows):.0f}% (max "
        f"{100 * max(r['second_time_error'] for r in rows):.0f}%), cost median "
        f"{100 * statistics.median(r['second_cost_error'] for r in rows):.0f}% (max "
        f"{100 * max(r['second_cost_error'] for r in rows):.0f}%); at a tenth stored: time-left error median "
        + (
            f"{100 * statistics.median(etas):.0f}% (max {100 * max(etas):.0f}%, {len(etas)} campaigns)"
            if etas
            else "unknown"
        )
        + ", rate error median "
        + (f"{100 * statistics.median(rates):.0f}% (max {100 * max(rates):.0f}%)" if rates else "unknown")
    )


if __name__ == "__main__":
    main()
