"""Model-ladder benchmark: how many strong-model rollouts a cheap model's calibration saves.

Demo-like data: the arithmetic ladder of `load_demo` (six levels of difficulty), probed through the
real campaign path (campaign_start / campaign_start_ladder, campaign_run_inline, verifiers,
calibration_refresh) against two fake OpenAI-compatible servers whose pass rates are simulated:
the cheap model's per task is logit-normal around a mean per level; the strong model's is the
cheap one's moved by +SHIFT on the logit scale plus per-task noise. Procedure, as a team would
run it: (1) the cheap model probes every task (adaptive, cap 256); (2) the strong model probes a
random sample (adaptive, no ladder) to fit the logit shift; (3) the strong model probes the rest
twice on the same outcome stream (same campaign seed): with the ladder prior, and without.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/calibration/ladder.py --per-level 50

It works in its own database (<name>_bench_ladder), created afresh each run.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database  # noqa: E402

LEVEL_CHEAP_RATES = [0.6, 0.3, 0.35, 0.08, 0.02, 0.003]  # cheap model, mean per demo level
SHIFT = 2.0
TASK_SPREAD = 1.0  # sd of the cheap model's logit around its level mean
LADDER_NOISE = 0.5  # sd of a task's own deviation from the ladder


def expit(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-level", type=int, default=10, help="Tasks per demo level (load_demo uses 10).")
    parser.add_argument(
        "--sample", type=int, default=20, help="Tasks the strong model probes first, to fit the ladder."
    )
    parser.add_argument("--cap", type=int, default=256)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    django_in_fresh_database(suffix="_bench_ladder")
    from django.contrib.auth import get_user_model

    from calibration import services
    from calibration.demo import arithmetic_tasks
    from calibration.models import Calibration, Rollout
    from curation.imports import tasks_import
    from curation.services import environment_create
    from tests.calibration.scripted import RIGHT, respond_with
    from tests.factories import jsonl
    from tests.support.openai_server import OpenAITestServer

    user = get_user_model().objects.create_superuser(username="bench", password="bench-only-password")
    environment = environment_create(name="arithmetic", domain="math")
    rng = random.Random(args.seed)
    tasks, cheap_rates, strong_rates = [], {}, {}
    for task in arithmetic_tasks(per_level=args.per_level):
        level = task["metadata"]["level"]
        cheap_logit = logit(LEVEL_CHEAP_RATES[level - 1]) + rng.gauss(0, TASK_SPREAD)
        cheap_rates[task["key"]] = expit(cheap_logit)
        strong_rates[task["key"]] = expit(cheap_logit + SHIFT + rng.gauss(0, LADDER_NOISE))
        # The scripted servers read the key from the prompt and answer RIGHT with the task's pass rate.
        tasks.append(
            {
                **task,
                "prompt": f"[{task['key']}] " + task["prompt"],
                "answer": RIGHT,
                "verifier": {"kind": "exact", "extract": "last_line"},
            }
        )
    tasks_import(environment=environment, owner=user, data=jsonl(*tasks), filename="demo.jsonl", run_audits=False)
    versions = {task.key: task.current_version for task in environment.tasks.select_related("current_version")}
    keys = sorted(versions)
    sample = sorted(rng.sample(keys, args.sample))
    rest = [key for key in keys if key not in sample]

    def rollouts(campaign) -> int:
        return Rollout.objects.filter(campaign=campaign).count()

    start = dict(environment=environment, created_by=user, policy="adaptive", rollouts=args.cap, enqueue=False)
    with (
        OpenAITestServer(respond=respond_with(cheap_rates), record_requests=False) as cheap_server,
        OpenAITestServer(respond=respond_with(strong_rates), record_requests=False) as strong_server,
    ):
        cheap = services.probe_model_add(name="cheap", backend="openai", base_url=cheap_server.base_url, model="fake")
        strong = services.probe_model_add(
            name="strong", backend="openai", base_url=strong_server.base_url, model="fake"
        )
        plain_model = services.probe_model_add(
            name="strong-plain", backend="openai", base_url=strong_server.base_url, model="fake"
        )
        cheap_campaign = services.campaign_run_inline(
            campaign=services.campaign_start(probe_model=cheap, seed=1, **start)
        )
        sample_campaign = services.campaign_run_inline(
            campaign=services.campaign_start(
                probe_model=strong, seed=2, task_versions=[versions[k] for k in sample], **start
            )
        )
        ladder = services.ladder_fit(environment=environment, cheap_model=cheap, strong_model=strong)
        with_ladder = services.campaign_run_inline(
            campaign=services.campaign_start_ladder(
                environment=environment,
                probe_model=strong,
                cheap_model=cheap,
                created_by=user,
                rollouts=args.cap,
                seed=3,
                enqueue=False,
            )
        )
        plain = services.campaign_run_inline(
            campaign=services.campaign_start(
                probe_model=plain_model, seed=3, task_versions=[versions[k] for k in rest], **start
            )
        )

    bands = {
        name: dict(
            Calibration.objects.filter(probe_model__name=name, task_version__task__key__in=rest).values_list(
                "task_version__task__key", "band"
            )
        )
        for name in ("strong", "strong-plain")
    }
    from engine import stats

    thresholds = services.thresholds_for(environment)
    truth = {key: stats.band_for_rate(pass_rate=strong_rates[key], thresholds=thresholds) for key in rest}

    def wrong_outside_zones(model: str) -> int:
        def outside(p):
            return not (
                thresholds.floor_zone[0] <= p < thresholds.floor_zone[1]
                or thresholds.retire_zone[0] <= p < thresholds.retire_zone[1]
            )

        return sum(1 for key in rest if outside(strong_rates[key]) and bands[model][key] != truth[key])

    ladder_n, plain_n, sample_n = rollouts(with_ladder), rollouts(plain), rollouts(sample_campaign)
    print(f"tasks {len(keys)} (demo levels x {args.per_level}); cheap model rollouts {rollouts(cheap_campaign)}")
    print(
        f"ladder: shift {ladder.shift:.2f} logits (true {SHIFT}), spread {ladder.spread:.2f}, fitted on {ladder.tasks} tasks ({sample_n} strong rollouts)"
    )
    print(
        f"strong model on the other {len(rest)} tasks: with ladder prior {ladder_n} rollouts ({ladder_n / len(rest):.1f}/task), "
        f"without {plain_n} ({plain_n / len(rest):.1f}/task): saved {plain_n - ladder_n} ({100 * (plain_n - ladder_n) / plain_n:.1f}%)"
    )
    print(
        f"including the fitting sample: {sample_n + ladder_n} vs {sample_n + plain_n} "
        f"({100 * (plain_n - ladder_n) / (sample_n + plain_n):.1f}% saved overall)"
    )
    same = sum(bands["strong"][key] == bands["strong-plain"][key] for key in rest)
    print(
        f"same band with and without the prior: {same}/{len(rest)}; wrong outside the zones: "
        f"with {wrong_outside_zones('strong')}, without {wrong_outside_zones('strong-plain')}"
    )


if __name__ == "__main__":
    main()
