"""What a running adaptive campaign's page costs to render: the stopping rule's time left per view, computed
(the cache empty, as before it was kept) and kept (calibration/selectors/pace_rule.py caches it per campaign
state).

One adaptive campaign with `--states` distinct open item states (passes of attempts, rounds of `--round-size`
up to a cap of `--cap`), its rollouts written straight to a SQLite file in a temporary folder, stored over
the last minutes so the rate is known; then `campaign_progress` (what the campaign page, the API and the
CLI read) timed `--views` times with the cache cleared before each view, and `--views` times as the
cache keeps it (the first of those fills it).

    .venv/bin/python bench/pace_cache.py
    .venv/bin/python bench/pace_cache.py --cap 16 --round-size 4 --states 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=256, help="rollouts per task at most")
    parser.add_argument("--round-size", type=int, default=8)
    parser.add_argument("--states", type=int, default=50, help="distinct open item states (the rule's limit: 50)")
    parser.add_argument("--views", type=int, default=20)
    return parser.parse_args()


def _campaign(args):
    """An adaptive campaign whose open items sit at `args.states` distinct (passes, attempts) states."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from calibration import services
    from calibration.models import CampaignItem, Outcome, Rollout
    from curation.services import environment_create
    from tests.factories import import_tasks

    user = get_user_model().objects.create_user("bench", is_staff=True)
    environment = environment_create(name="pace-cache", domain="math", default_verifier={"kind": "exact"})
    import_tasks(
        environment, user, *[{"key": f"t{i}", "prompt": f"Say {i}", "answer": str(i)} for i in range(args.states)]
    )
    model = services.probe_model_add(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1", model="m")
    campaign = services.campaign_start(
        environment=environment, probe_model=model, created_by=user, policy="adaptive", rollouts=args.cap,
        round_size=args.round_size, enqueue=False,
    )  # fmt: skip
    now = timezone.now()
    rows = []
    for position, item in enumerate(CampaignItem.objects.filter(campaign=campaign).order_by("pk")):
        rounds = 1 + position % 3  # one to three rounds stored, passes spread: every item its own state
        attempts = rounds * args.round_size
        passes = (position * 7) % (attempts + 1)
        CampaignItem.objects.filter(pk=item.pk).update(round=rounds)
        for index in range(attempts):
            rows.append(
                Rollout(campaign=campaign, task_version_id=item.task_version_id, probe_model=model, sample_index=index,
                        seed=index, outcome=Outcome.PASS if index < passes else Outcome.FAIL, device_ms=1000)
            )  # fmt: skip
    Rollout.objects.bulk_create(rows)
    # Stored a round at a time over the last minutes: a known rate.
    for position, version in enumerate(campaign.items.values_list("task_version_id", flat=True)):
        Rollout.objects.filter(campaign=campaign, task_version_id=version).update(
            created_at=now - timedelta(seconds=240 - 4 * position)
        )
    return campaign


def _time(campaign, *, views: int, clear: bool) -> list[float]:
    from django.core.cache import cache

    from calibration import selectors

    seconds = []
    for _ in range(views):
        if clear:
            cache.clear()
        started = time.perf_counter()
        selectors.campaign_progress(campaign=campaign)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    args = _arguments()
    os.environ.update(DJANGO_SETTINGS_MODULE="passband.settings", LOG_LEVEL="WARNING")
    os.environ.setdefault("SECRET_KEY", "passband-bench-only")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CACHE_URL", None)  # the default per-process cache
    os.environ["PASSBAND_VAR_DIR"] = tempfile.mkdtemp(prefix="passband-pace-cache-")
    os.environ.setdefault("PASSBAND_OUTBOUND_ALLOW_HOSTS", "127.0.0.1")

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from calibration.selectors.pace_rule import items_ahead

    campaign = _campaign(args)
    ahead = items_ahead(campaign=campaign)
    print(
        f"{args.states} open items, cap {args.cap} in rounds of {args.round_size}: the rule "
        f"{'ran' if ahead is not None else 'did not run (too many states)'}; load average {os.getloadavg()[0]:.1f}"
    )
    computed = _time(campaign, views=args.views, clear=True)
    kept = _time(campaign, views=args.views, clear=False)
    for name, seconds in (("computed every view (before)", computed), ("kept in the cache (now)", kept)):
        print(
            f"{name}: median {1000 * statistics.median(seconds):.1f} ms, max {1000 * max(seconds):.1f} ms "
            f"over {len(seconds)} views"
        )


if __name__ == "__main__":
    main()
