"""Estimate benchmark: how often a first probe's stated range holds the actual time and cost, the second
campaign's estimate error, and the rate and time-left error once a tenth of the rollouts is stored.

Each run registers a new probe model on an OpenAI-compatible test server slowed to a known rate (a fixed
seconds per request; answers ending with probability `--eos` per token), probes an environment with it
(the first estimate: no measured speed), then probes it again (the second estimate: measured here); beside
each estimate, as a same-run baseline, the one before it (an adaptive probe's every task to the cap). A
first run warms the process up and is not counted. Campaigns run in this process, on a SQLite file in a
temporary folder, so it fits 2 cores: one item after another (campaign_run_inline, the same rounds the
workers run) or `--concurrency` items at once in threads, as that many workers would. A thread reads the
campaign page's figures every `--poll` seconds, at moments unrelated to the rounds, with the estimator
(calibration/selectors/pace.py) and, at the same moments, an alternative tried (_fitted_pace: a slope fitted
through every store rather than the rollouts after the first closed burst over the time between the first
and last closed bursts' ends) and, as a baseline, the estimator before bursts (_old_pace). The rate is scored
against the next tenth's rate from the reading, from the store before it, and the rest's rate.
ESTIMATES_DIAGNOSE=1 prints, at each campaign's first time left, the rollouts left and the rate against what
followed.
`--policy adaptive` answers task i right with probability i/(tasks-1), so adaptive stopping drops tasks.

    .venv/bin/python bench/estimates.py --runs 10
    .venv/bin/python bench/estimates.py --runs 10 --tasks 16 --policy adaptive --rollouts 16 --round-size 4 \
        --concurrency 4 --latency-scale 4
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LATENCIES = (0.05, 0.1, 0.2, 0.3, 0.5)  # seconds per request: the servers' known rates, cycled


def _old_pace(campaign, *, now) -> tuple[float | None, float | None]:
    """The estimator before the burst-based one, kept here as the baseline (same moments, same rows): the
    rollouts stored after the window's first store over the time from it to now, and the open items'
    rollouts to the cap at that rate."""
    from django.db.models import Count

    from calibration.models import CampaignItem, Rollout

    stores = list(
        Rollout.objects.filter(campaign=campaign, created_at__gte=now - timedelta(minutes=10))
        .values("created_at")
        .annotate(count=Count("id"))
        .order_by("created_at")
    )
    seconds = (now - stores[0]["created_at"]).total_seconds() if len(stores) >= 2 else 0
    if seconds <= 0:
        return None, None
    rate = sum(store["count"] for store in stores[1:]) / (seconds / 60)
    open_items = CampaignItem.objects.filter(campaign=campaign, done=False)
    stored_open = Rollout.objects.filter(campaign=campaign, task_version__in=open_items.values("task_version")).count()
    remaining = max(open_items.count() * campaign.max_rollouts - stored_open, 0)
    return rate, 60 * remaining / rate


def _fitted_pace(campaign, *, now) -> tuple[float | None, float | None, bool]:
    """An alternative tried against the estimator (same moments, same rows, same bursts and "unknown" rules):
    the rate as the least-squares slope of the rollouts stored so far against time through every store of
    the closed bursts, rather than the rollouts after the first closed burst over the time between the first
    and last closed bursts' ends; a round split into two bursts then moves a few points rather than the
    window's ends. Time left as the estimator's. Returns (rate, time left, is a bound)."""
    import itertools

    from django.db.models import Count, Min, Sum

    from calibration.models import Rollout
    from calibration.selectors import pace

    rows = list(
        Rollout.objects.filter(campaign=campaign, created_at__gte=now - pace.RATE_WINDOW)
        .values("created_at", "task_version_id")
        .annotate(count=Count("id"), device_ms=Sum("device_ms"))
        .order_by("created_at")
    )
    stores: dict = {}
    for row in rows:
        stores[row["created_at"]] = stores.get(row["created_at"], 0) + row["count"]
    round_seconds = pace._round_seconds(rows)
    min_gap = pace.BURST_SHARE * round_seconds
    bursts = pace._bursts(list(stores.items()), min_gap_seconds=min_gap)
    last_store = bursts[-1][1] if bursts else now
    if bursts and (now - bursts[-1][0]).total_seconds() < min_gap:
        bursts = bursts[:-1]
    if rows and rows[0]["created_at"] == Rollout.objects.filter(campaign=campaign).aggregate(m=Min("created_at"))["m"]:
        bursts = bursts[1:]
    if len(bursts) < 2:
        return None, None, False
    measured = [(instant, n) for instant, n in stores.items() if bursts[0][0] <= instant <= bursts[-1][1]]
    span = (bursts[-1][1] - bursts[0][1]).total_seconds()
    if span <= 0 or span < round_seconds:
        return None, None, False
    seconds = [(instant - measured[0][0]).total_seconds() for instant, _ in measured]
    stored = list(itertools.accumulate(n for _, n in measured))
    mean_x, mean_y = statistics.fmean(seconds), statistics.fmean(stored)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(seconds, stored, strict=True)) / sum(
        (x - mean_x) ** 2 for x in seconds
    )
    if slope <= 0:
        return None, None, False
    stalled = max((now - last_store).total_seconds() - span / (len(bursts) - 1), 0.0)
    rate = 60 * slope * span / (span + stalled)
    left = pace.rollouts_left(campaign=campaign)
    eta = max(60 * left.rollouts / rate, left.rounds * round_seconds) if left.rollouts else 0.0
    return rate, eta, left.is_bound


def _watch(campaign, stop: threading.Event, samples: list, poll_s: float) -> None:
    """Every `poll_s` seconds until `stop`: (monotonic time, rollouts stored, new rate, new time left, whether
    it is a bound, old rate, old time left, whether that was a bound: its page said "at most" for an adaptive
    campaign, the new rollouts left, the fitted rate, time left and whether that is a bound), read as the
    page reads them, at moments unrelated to the rounds."""
    from django.db import connection
    from django.utils import timezone

    from calibration import selectors
    from calibration.selectors.pace import rollouts_left

    try:
        while not stop.wait(poll_s):
            shown = selectors.campaign_progress(campaign=campaign)
            old_rate, old_eta = _old_pace(campaign, now=timezone.now())
            fitted = _fitted_pace(campaign, now=timezone.now())
            samples.append(
                (time.monotonic(), shown["stored"], shown["rollouts_per_minute"], shown["eta_seconds"],
                 shown["eta_is_bound"], old_rate, old_eta, campaign.policy == "adaptive",
                 rollouts_left(campaign=campaign).rollouts, *fitted)
            )  # fmt: skip
    finally:
        connection.close()


def _run_items(services, campaign, *, concurrency: int) -> None:
    """The campaign's rounds: inline (one item after another) or `concurrency` items at once, each in
    its own thread and database connection, as that many worker processes would run them."""
    from django.db import connection

    from calibration.models import CampaignItem

    if concurrency == 1:
        services.campaign_run_inline(campaign=campaign)
        return
    items = list(CampaignItem.objects.filter(campaign=campaign, done=False).values_list("task_version_id", "round"))
    lock = threading.Lock()

    def worker() -> None:
        try:
            while True:
                with lock:
                    if not items:
                        return
                    version_id, round_index = items.pop(0)
                while services.round_run(
                    campaign_id=campaign.pk, task_version_ids=[version_id], round_index=round_index
                ):
                    round_index += 1
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _errors(samples: list, *, finished: float, stored: int, columns: tuple[int, int, int]) -> dict:
    """For one estimator (the sample columns of its rate, time left and whether that is a bound), from the
    first sample with a tenth stored and a known rate: the rate's error against the rate over the next
    tenth of the rollouts, the time left's against the seconds actually left (or, for a bound, whether it
    held), the share stored then; the first time left that is an estimate, not a bound, its error and
    share; and the median errors over every later sample up to nine tenths stored."""
    rate_at, eta_at, bound_at = columns
    known = [s for s in samples if stored / 10 <= s[1] < stored and s[rate_at] is not None and finished > s[0]]
    if not known:
        return {}

    def rate_error(index: int, *, whole_rounds: bool = False, rate: float | None = None) -> float:
        """Against the next tenth's rate from the reading; or, `whole_rounds`, from the store before it (the
        first reading that saw its count), so that where between two rounds the reading fell does not count.
        `rate`: score that figure instead of the estimator's."""
        sample = known[index]
        later = next((s for s in known[index:] if s[1] >= sample[1] + stored / 10), (finished, stored))
        since = next(s[0] for s in samples if s[1] == sample[1]) if whole_rounds else sample[0]
        actual = 60 * (later[1] - sample[1]) / (later[0] - since)
        return abs((sample[rate_at] if rate is None else rate) - actual) / actual

    def eta_error(sample) -> float:
        return abs(sample[eta_at] - (finished - sample[0])) / (finished - sample[0])

    first = known[0]
    estimates = [s for s in known if not s[bound_at]]
    if rate_at == 2 and estimates and os.environ.get("ESTIMATES_DIAGNOSE"):
        s = estimates[0]
        left, seconds = stored - s[1], finished - s[0]
        print(
            f"  at {s[1]}/{stored}: rollouts left {s[8]:.1f} vs {left} ({100 * (s[8] - left) / max(left, 1):+.0f}%), "
            f"rate {s[2]:.1f} vs {60 * left / seconds:.1f} over the rest ({100 * (s[2] * seconds / 60 - left) / max(left, 1):+.0f}%),"
            f" eta {s[3]:.1f} vs {seconds:.1f} s"
        )
    rates = [rate_error(i) for i, s in enumerate(known) if s[1] <= 0.9 * stored]
    etas = [eta_error(s) for s in estimates if s[1] <= 0.9 * stored]
    return {
        "rate": rate_error(0),
        "rate_rounds": rate_error(0, whole_rounds=True),
        # What a reader who knew the rest's average rate would score against the next tenth: the measure's floor.
        "rate_oracle": rate_error(0, rate=60 * (stored - first[1]) / (finished - first[0])),
        # Against the rate over the rest of the campaign: a tenth is one or two rounds of the jobs, so the next
        # tenth's rate depends on where between two rounds the reading fell.
        "rate_rest": abs(first[rate_at] - 60 * (stored - first[1]) / (finished - first[0]))
        / (60 * (stored - first[1]) / (finished - first[0])),
        "share": first[1] / stored,
        "eta": None if first[bound_at] else eta_error(first),
        "bound_held": first[eta_at] >= finished - first[0] if first[bound_at] else None,
        "eta_estimate": eta_error(estimates[0]) if estimates else None,
        "eta_share": estimates[0][1] / stored if estimates else None,
        "rate_over": statistics.median(rates) if rates else None,
        "eta_over": statistics.median(etas) if etas else None,
    }


def _campaign(services, selectors, *, environment, model, user, tasks: int, options) -> dict:
    """Run one campaign; its actual seconds and cost, and what both estimators showed from a tenth of its
    rollouts stored on (errors against what actually followed)."""
    from curation.models import Task

    versions = list(Task.objects.filter(environment=environment).values_list("current_version", flat=True))
    estimate = selectors.probe_estimate(
        probe_model=model, tasks=tasks, rollouts=options.rollouts, max_new_tokens=model.max_new_tokens,
        policy=options.policy, environment=environment, task_versions=versions,
        round_size=options.round_size or options.rollouts,
    )  # fmt: skip
    # The estimate before this one, as a same-run baseline: every task to the cap.
    capped = selectors.probe_estimate(
        probe_model=model, tasks=tasks, rollouts=options.rollouts, max_new_tokens=model.max_new_tokens
    )
    campaign = services.campaign_start(
        environment=environment, probe_model=model, created_by=user, rollouts=options.rollouts,
        round_size=options.round_size or options.rollouts, policy=options.policy, enqueue=False,
    )  # fmt: skip
    samples: list = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(campaign, stop, samples, options.poll))
    started = time.monotonic()
    watcher.start()
    try:
        _run_items(services, campaign, concurrency=options.concurrency)
    finally:
        finished = time.monotonic()
        stop.set()
        watcher.join()
    actual = selectors.campaign_progress(campaign=campaign)
    # Tenths of what the campaign actually stored (adaptive: fewer than the cap).
    kwargs = {"finished": finished, "stored": actual["stored"]}
    return {
        "estimate": estimate,
        "capped": capped,
        "stored": actual["stored"],
        "seconds": finished - started,
        "cost": actual["cost"],
        "new": _errors(samples, columns=(2, 3, 4), **kwargs),
        "old": _errors(samples, columns=(5, 6, 7), **kwargs),
        "fitted": _errors(samples, columns=(9, 10, 11), **kwargs),
    }


def _respond(tasks: int):
    """Answers for the adaptive runs: task i is answered right with probability i / (tasks - 1), so
    adaptive stopping ends easy and hard tasks early and keeps the middle ones."""
    pattern = re.compile(r"Say (\d+) \+ (\d+)")

    def respond(prompt: str, seed: int) -> str:
        found = pattern.search(prompt)
        if found is None:
            return "no idea"
        task, run = int(found[1]), int(found[2])
        right = random.Random(seed).random() < task / max(tasks - 1, 1)
        return str(task + run) if right else "no idea"

    return respond


def _held(bounds: tuple[float, float], actual: float) -> bool:
    return bounds[0] <= actual <= bounds[1]


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{100 * value:.0f}%"


def _summary(values: list[float]) -> str:
    return f"median {100 * statistics.median(values):.0f}% (max {100 * max(values):.0f}%)" if values else "unknown"


def _at_a_tenth(campaign: dict) -> str:
    """One campaign's figures at the first reading once a tenth is stored: new (pre-burst) [fitted]."""
    new, old, fitted = campaign["new"], campaign["old"], campaign["fitted"]

    def eta(figures: dict) -> str:
        if figures.get("bound_held") is not None:
            return f"bound {'held' if figures['bound_held'] else 'MISSED'}"
        return _percent(figures.get("eta"))

    return (
        f"rate {_percent(new.get('rate'))} ({_percent(old.get('rate'))}) [{_percent(fitted.get('rate'))}], time left "
        f"{eta(new)} ({eta(old)}) [{eta(fitted)}] at "
        f"{_percent(new.get('share'))} ({_percent(old.get('share'))}) stored"
    )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--rollouts", type=int, default=8, help="per task (fixed), the cap (adaptive)")
    parser.add_argument("--round-size", type=int, default=0, help="rollouts per round; 0: all in one round")
    parser.add_argument("--policy", choices=("fixed", "adaptive"), default="fixed")
    parser.add_argument("--concurrency", type=int, default=1, help="items at once (threads), as that many workers")
    parser.add_argument("--latency-scale", type=float, default=1.0, help="times the servers' seconds per request")
    parser.add_argument("--poll", type=float, default=0.05, help="seconds between two readings of the page's figures")
    parser.add_argument("--budget", type=int, default=48, help="max new tokens per rollout")
    parser.add_argument("--eos", type=float, default=0.04, help="the server's chance of ending an answer per token")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    os.environ.update(DJANGO_SETTINGS_MODULE="passband.settings", LOG_LEVEL="WARNING")
    os.environ.setdefault("SECRET_KEY", "passband-bench-only")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["PASSBAND_VAR_DIR"] = tempfile.mkdtemp(prefix="passband-estimates-")
    os.environ.setdefault("PASSBAND_OUTBOUND_ALLOW_HOSTS", "127.0.0.1")

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
    respond = _respond(args.tasks) if args.policy == "adaptive" else None
    for run in range(-1, args.runs):  # run -1 warms the process up (imports, verifier helpers); not counted
        latency = LATENCIES[max(run, 0) % len(LATENCIES)] * args.latency_scale
        environment = environment_create(name=f"bench-{run}", domain="math", default_verifier={"kind": "exact"})
        import_tasks(
            environment, user,
            *[{"key": f"t{i}", "prompt": f"Say {i} + {run}", "answer": str(i + run), "verifier": {"kind": "exact"}}
              for i in range(args.tasks)],
        )  # fmt: skip
        with serve_openai(latency_s=latency, eos_probability=args.eos, record_requests=False, respond=respond) as url:
            model = services.probe_model_add(
                name=f"server-{run}", backend="openai", base_url=url, model="fake-model",
                max_new_tokens=args.budget, usd_per_gpu_hour=2.0, usd_per_million_output_tokens=10,
            )  # fmt: skip
            kwargs = {"environment": environment, "model": model, "user": user, "tasks": args.tasks, "options": args}
            first = _campaign(services, selectors, **kwargs)
            if run < 0:
                continue
            second = _campaign(services, selectors, **kwargs)
        low_s, high_s = first["estimate"]["seconds_range"]
        low_c, high_c = first["estimate"]["cost_range"]
        row = {
            "time_held": _held((low_s, high_s), first["seconds"]),
            "cost_held": _held((low_c, high_c), first["cost"]),
            "second_time_error": abs(second["estimate"]["seconds"] - second["seconds"]) / second["seconds"],
            "second_cost_error": abs(second["estimate"]["cost_usd"] - second["cost"]) / second["cost"],
            "capped_time_error": abs(second["capped"]["seconds"] - second["seconds"]) / second["seconds"],
            "capped_cost_error": abs(second["capped"]["cost_usd"] - second["cost"]) / second["cost"],
            "capped_time_held": _held(first["capped"]["seconds_range"], first["seconds"]),
            "capped_cost_held": _held(first["capped"]["cost_range"], first["cost"]),
            "rollouts_error": [
                abs(c["estimate"]["expected_rollouts"] - c["stored"]) / c["stored"] for c in (first, second)
            ],
            "campaigns": (first, second),
        }
        rows.append(row)
        print(
            f"run {run}: {latency:.2f} s/request · first {first['seconds']:.1f} s in [{low_s:.1f}, {high_s:.1f}] "
            f"{'held' if row['time_held'] else 'MISSED'}, ${first['cost']:.5f} in [{low_c:.5f}, {high_c:.5f}] "
            f"{'held' if row['cost_held'] else 'MISSED'} · second: time error {_percent(row['second_time_error'])}, "
            f"cost error {_percent(row['second_cost_error'])} (every task to the cap: "
            f"{_percent(row['capped_time_error'])}, {_percent(row['capped_cost_error'])}); expected rollouts "
            f"{first['estimate']['expected_rollouts']:.0f} vs {first['stored']}, "
            f"{second['estimate']['expected_rollouts']:.0f} vs {second['stored']} · from a tenth, new (old): "
            + "; ".join(_at_a_tenth(c) for c in (first, second)),
            flush=True,
        )
    campaigns = [c for row in rows for c in row["campaigns"]]

    def gathered(estimator: str, key: str) -> list[float]:
        return [c[estimator][key] for c in campaigns if c[estimator].get(key) is not None]

    print(
        f"\nfirst estimate's range held the time in {sum(r['time_held'] for r in rows)}/{len(rows)} runs and the cost "
        f"in {sum(r['cost_held'] for r in rows)}/{len(rows)}; second campaign's estimate error: time "
        f"{_summary([r['second_time_error'] for r in rows])}, cost {_summary([r['second_cost_error'] for r in rows])}"
        f"; the expected rollouts' error, first campaigns {_summary([r['rollouts_error'][0] for r in rows])}, second "
        f"{_summary([r['rollouts_error'][1] for r in rows])}\nthe estimate before (every task to the cap), same runs: "
        f"first range held the time in {sum(r['capped_time_held'] for r in rows)}/{len(rows)} runs and the cost in "
        f"{sum(r['capped_cost_held'] for r in rows)}/{len(rows)}; second campaign's error: time "
        f"{_summary([r['capped_time_error'] for r in rows])}, cost {_summary([r['capped_cost_error'] for r in rows])}"
    )
    for estimator in ("new", "fitted", "old"):
        held = [c[estimator]["bound_held"] for c in campaigns if c[estimator].get("bound_held") is not None]
        print(
            f"{estimator}: first figure once a tenth is stored ({len(gathered(estimator, 'rate'))} of {len(campaigns)} "
            f"campaigns, stored then {_summary(gathered(estimator, 'share'))}): rate error (against the next tenth's "
            f"rate) {_summary(gathered(estimator, 'rate'))} (the next tenth from the store before the reading "
            f"{_summary(gathered(estimator, 'rate_rounds'))}, the rest's rate {_summary(gathered(estimator, 'rate_rest'))};"
            f" the rest's own rate against the next tenth {_summary(gathered(estimator, 'rate_oracle'))})"
            f", time-left error {_summary(gathered(estimator, 'eta'))}"
            f" ({len(held)} were upper bounds, {sum(held)} held); the first time left that is an estimate "
            f"(stored then {_summary(gathered(estimator, 'eta_share'))}): error "
            f"{_summary(gathered(estimator, 'eta_estimate'))}; every reading to nine tenths (median per campaign): "
            f"rate {_summary(gathered(estimator, 'rate_over'))}, time left {_summary(gathered(estimator, 'eta_over'))}"
        )


if __name__ == "__main__":
    main()
