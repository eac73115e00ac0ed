"""Side information through the service, at real size, on the real tasks' scores.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband \\
        nice .venv/bin/python bench/calibration/side_service.py --tasks 4000 --seed 0

bench/calibration/real_side.py measures the tables per stratum in the engine; this runs the same
real evidence through what the service does (``calibration.services.environment_learning``, its
cache, ``calibrations_refresh``), in its own PostgreSQL database (<name>_side_service, made afresh).

Each environment holds ``--tasks`` tasks drawn with replacement from the 244 real tasks of
bench/calibration/real_side_counts.json (SmolLM2-135M on the demo arithmetic ladder and HumanEval),
each with a true probe pass rate drawn from the Jeffreys posterior of its real probe counts (as
real_side.py does). Half are the pilot: calibrated under the probe model by the default rule, run on
the true rate. Three environments differ only in the side information they hold:

* **declared**: each task declares its ladder level as ``difficulty`` (HumanEval declares none);
* **earlier model**: an "earlier" probe model has calibrated every task with the real task's
  neighbour-rung counts (SmolLM2 at temperature 0.3, 8 rollouts);
* **both**: both; the service keeps the source whose strata it predicts to be cheaper.

For each, the time the service takes to learn (cold cache: the table without side information, the
scores, the tables per stratum of each source) and to refresh the other half's calibrations once
learned; and, banding the other half exactly (``side.exact``) with the table each task follows in
the service (``LearnedTables.table_for``), the rollouts and the error outside the zones, against the
rule and the table learned without side information (the baseline, from the same run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "calibration"))

from bench.database import django_in_fresh_database  # noqa: E402

KINDS = ("declared", "earlier model", "both")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--counts", default=str(ROOT / "bench/calibration/real_side_counts.json"))
    arguments = parser.parse_args()
    django_in_fresh_database(suffix="_side_service")
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from side import exact
    from simulate import run_tables

    from calibration import services
    from calibration.models import Calibration, ProbeModel
    from calibration.services.policies import sampling_policy, thresholds_for
    from curation.imports import tasks_import
    from curation.services import environment_create
    from engine import stats

    settings.PASSBAND_LEARNED_MIN_TASKS = 1000
    real = json.loads(Path(arguments.counts).read_text())["tasks"]
    keys = list(real)
    rng = np.random.default_rng(arguments.seed)
    drawn = rng.integers(0, len(keys), arguments.tasks)
    probe_counts = np.array([real[keys[index]]["probe"] for index in drawn], dtype=float)
    rates = rng.beta(probe_counts[:, 0] + 0.5, probe_counts[:, 1] - probe_counts[:, 0] + 0.5)
    half = arguments.tasks // 2
    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench")
    probe = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    earlier = ProbeModel.objects.create(name="earlier", backend="openai", base_url="http://127.0.0.1:9/v1")
    policy_stored = {"kind": "adaptive", "round_size": 8, "max_rollouts": 256, "confidence": 0.95}
    policy = sampling_policy(policy_stored, attempts=0)
    print(f"{arguments.tasks:,} tasks an environment, {half:,} calibrated (the pilot); seed {arguments.seed}\n")
    print(
        "| side information | source kept | learning, cold (s) | refresh of the other half (s) "
        "| rule: rollouts, error | learned, no side information | as the service bands: rollouts, error | saving |"
    )
    print("|---|---|---:|---:|---|---|---|---:|")
    for kind in KINDS:
        environment = environment_create(name=kind.replace(" ", "-"), domain="math", default_verifier={"kind": "math"})
        thresholds = thresholds_for(environment)
        lines = []
        for copy, index in enumerate(drawn):
            task = real[keys[index]]
            line = {"key": f"t{copy:05d}", "prompt": f"{task['prompt']}\n(copy {copy})", "answer": "0"}
            if kind != "earlier model" and task.get("level"):
                line["difficulty"] = task["level"]
            lines.append(json.dumps(line) + "\n")
        report = tasks_import(
            environment=environment, owner=user, data="".join(lines).encode(), filename=f"{kind}.jsonl"
        )
        assert report.ok, report.summary()
        versions = {task.key: task.current_version for task in environment.tasks.select_related("current_version")}
        ordered = [versions[f"t{copy:05d}"] for copy in range(arguments.tasks)]
        default = stats.stopping_table(thresholds=thresholds, policy=policy)
        _, attempts, passes = run_tables(default, rates[:half], rng)
        rows = [
            Calibration(
                task_version=version, probe_model=probe, attempts=int(a), successes=int(p), policy=policy_stored
            )
            for version, a, p in zip(ordered[:half], attempts, passes)
        ]
        if kind != "declared":
            rows += [
                Calibration(
                    task_version=version,
                    probe_model=earlier,
                    successes=int(real[keys[index]]["neighbour"][0]),
                    attempts=int(real[keys[index]]["neighbour"][1]),
                )
                for version, index in zip(ordered, drawn)
            ]
        Calibration.objects.bulk_create(rows, batch_size=2000)
        cache.clear()
        started = time.perf_counter()
        learning = services.environment_learning(environment=environment, probe_model=probe, policy=policy)
        learn_seconds = time.perf_counter() - started
        started = time.perf_counter()
        services.calibrations_refresh(
            task_versions=ordered[half:], probe_model=probe, policies={v.pk: policy_stored for v in ordered[half:]}
        )
        refresh_seconds = time.perf_counter() - started
        assert learning is not None
        tables = learning.tables
        test = rates[half:]
        plain_table = tables.table if tables is not None and tables.table is not None else default
        followed = [
            (tables.table_for(version.task_id, version) if tables is not None else None) or default
            for version in ordered[half:]
        ]
        groups: dict[int, list[int]] = {}
        for position, table in enumerate(followed):
            groups.setdefault(id(table), []).append(position)
        by_id = {id(table): table for table in followed}
        service = exact([(by_id[key], test[np.array(where)]) for key, where in groups.items()])
        rule, plain = exact([(default, test)]), exact([(plain_table, test)])
        source = learning.strata_source or "none"
        kept = (
            f"{source} ({len(tables.strata)} strata)"
            if tables is not None and tables.strata
            else f"{source}: rule kept"
        )
        print(
            f"| {kind} | {kept} | {learn_seconds:.1f} | {refresh_seconds:.1f} "
            f"| {rule['rollouts']:.1f}, {rule['error']:.2%} | {plain['rollouts']:.1f}, {plain['error']:.2%} "
            f"| {service['rollouts']:.1f}, {service['error']:.2%} | {service['rollouts'] / plain['rollouts'] - 1:+.0%} |",
            flush=True,
        )
        if learning.strata_reason and not (tables is not None and tables.strata):
            print(f"|  | why: {learning.strata_reason} | | | | | | |")


if __name__ == "__main__":
    main()
