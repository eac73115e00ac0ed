"""What the impossible-variant probe costs beside the environment's own probe: rollouts, dollars and seconds.

An environment of exact-numeric tasks ("Say 42", numeric verifier) is probed by a priced model served by the
vLLM-shaped pool server (bench/fake_vllm.py: real answer shapes and token counts, half the samples right), the
way a campaign probes it (the baseline, same run): fixed N=8, then adaptive up to the cap. Then the variant probe
(calibration/services/impossible_variants.py) takes its default sample of tasks and attempts each, under the same
model and settings. Prints each run's rollouts, dollars and seconds and the variant probe's share of each
baseline; a clean verifier, so the false-pass line must read 0 of N (a pass would be a bug of the bench).

With --demo-sets (no database): each demo set's variants derived and checked against the reference and the
empty answer (the sandbox for code and repositories, world replays for the back office), counted by status and
kind, timed; then 8 reference patches graded on 3 repository variants and on their tasks, timed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/impossible_variants.py \\
        [--tasks 200] [--sample 20] [--rollouts 8] [--cap 64]
    .venv/bin/python bench/impossible_variants.py --demo-sets
"""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database, exact_match_environment  # noqa: E402

PRICE = {"usd_per_million_input_tokens": Decimal("0.20"), "usd_per_million_output_tokens": Decimal("0.60")}


def campaign_cost(campaign) -> tuple[int, Decimal]:
    from django.db.models import Count, Sum

    from calibration.models import Rollout

    totals = Rollout.objects.filter(campaign=campaign).aggregate(rollouts=Count("id"), usd=Sum("cost_usd"))
    return totals["rollouts"], totals["usd"] or Decimal(0)


def probe_inline(*, environment, model, user, policy: str, rollouts: int):
    from calibration import services

    started = time.perf_counter()
    campaign = services.campaign_start(
        environment=environment,
        probe_model=model,
        created_by=user,
        policy=policy,
        rollouts=rollouts,
        round_size=8 if policy == "adaptive" else rollouts,
        seed=3,
        enqueue=False,
    )
    services.campaign_run_inline(campaign=campaign)
    return (*campaign_cost(campaign), time.perf_counter() - started)


def variants_inline(*, environment, model, user, sample: int, rollouts: int):
    from django.db.models import Count, Q, Sum

    from calibration import services
    from calibration.models import VariantRollout

    started = time.perf_counter()
    probe = services.variant_probe_start(
        environment=environment,
        probe_model=model,
        created_by=user,
        sample=sample,
        rollouts=rollouts,
        seed=5,
        enqueue=False,
    )
    services.variant_probe_run(probe_id=probe.pk)
    seconds = time.perf_counter() - started
    totals = VariantRollout.objects.filter(variant__probe=probe).aggregate(
        rollouts=Count("id"), usd=Sum("cost_usd"), passes=Count("id", filter=Q(outcome="pass"))
    )
    return totals["rollouts"], totals["usd"] or Decimal(0), seconds, totals["passes"]


def repository_tasks() -> list[dict]:
    """The demo repository tasks (inflection), their snapshots in a store of this process's own."""
    from types import SimpleNamespace

    from curation import repo_demo
    from engine.repo_tasks import snapshots

    stored: dict[str, bytes] = {}

    def store(*, data: bytes):
        digest = snapshots.digest_of(data)
        stored[digest] = data
        return SimpleNamespace(digest=digest)

    snapshots.configure_store(lambda digest: stored[digest])
    return list(repo_demo.task_rows(store=store))


def repository_grading(tasks: list[dict], *, attempts: int) -> None:
    """Seconds to grade `attempts` patches (the reference's) on a task's variant and on the task itself, in one
    ``verify_many`` each: what a repository variant's attempts cost beside the task's own."""
    from engine.verifiers import impossible, verify_many

    on_variant = on_task = 0.0
    for task in tasks:
        checked = impossible.variant_check(verifier=task["verifier"], answer=task["answer"])
        started = time.perf_counter()
        verify_many(verifier=checked.variant.verifier, completions=[task["answer"]] * attempts)
        on_variant += time.perf_counter() - started
        started = time.perf_counter()
        verify_many(verifier=task["verifier"], completions=[task["answer"]] * attempts)
        on_task += time.perf_counter() - started
    print(
        f"repository grading, {len(tasks)} tasks x {attempts} attempts: {on_variant:.1f} s on the variants, "
        f"{on_task:.1f} s on the tasks themselves"
    )


def demo_sets() -> None:
    from collections import Counter

    from calibration.demo import arithmetic_tasks, humaneval_tasks
    from engine.episodes.backoffice_tasks import backoffice_tasks
    from engine.verifiers import impossible

    print("| demo set | tasks | by status | by kind | seconds |")
    print("|---|---:|---|---|---:|")
    repositories = repository_tasks()
    for name, tasks in (
        ("arithmetic", arithmetic_tasks),
        ("HumanEval", humaneval_tasks),
        ("backoffice", backoffice_tasks),
        ("repositories", lambda: repositories),
    ):
        started, statuses, kinds = time.perf_counter(), Counter(), Counter()
        for task in tasks():
            checked = impossible.variant_check(
                verifier=task["verifier"], answer=task.get("answer"), prompt=task["prompt"], tools=task.get("tools")
            )
            statuses[checked.status] += 1
            kinds[checked.variant.kind if checked.variant else "none"] += 1
        seconds = time.perf_counter() - started
        print(f"| {name} | {sum(statuses.values())} | {dict(statuses)} | {dict(kinds)} | {seconds:.1f} |")
    repository_grading(repositories[:3], attempts=8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--cap", type=int, default=64, help="The adaptive baseline's cap per task.")
    parser.add_argument("--demo-sets", action="store_true", help="Derive and check the demo sets' variants only.")
    arguments = parser.parse_args()
    if arguments.demo_sets:
        demo_sets()
        return
    django_in_fresh_database(suffix="_impossible_variants")
    from bench.fake_vllm import PooledVLLMServer
    from calibration import services
    from calibration.models import ProbeModel

    user, environment = exact_match_environment(tasks=arguments.tasks, verifier={"kind": "numeric"})
    with PooledVLLMServer(max_tokens=256) as server:
        model = services.probe_model_add(
            name="pooled", backend="openai", base_url=server.base_url, model="pooled", max_new_tokens=256
        )
        ProbeModel.objects.filter(pk=model.pk).update(**PRICE)
        model.refresh_from_db()
        fixed = probe_inline(environment=environment, model=model, user=user, policy="fixed", rollouts=8)
        adaptive = probe_inline(
            environment=environment, model=model, user=user, policy="adaptive", rollouts=arguments.cap
        )
        *variant, passes = variants_inline(
            environment=environment, model=model, user=user, sample=arguments.sample, rollouts=arguments.rollouts
        )
    print(f"{arguments.tasks} tasks; variant probe: {arguments.sample} sampled, {arguments.rollouts} attempts each")
    print("| run | rollouts | dollars | seconds | variant probe's share (rollouts / dollars) |")
    print("|---|---:|---:|---:|---|")
    for name, (rollouts, usd, seconds) in (("fixed N=8", fixed), (f"adaptive, cap {arguments.cap}", adaptive)):
        share = f"{variant[0] / rollouts:.1%} / {float(variant[1] / usd) if usd else 0:.1%}"
        print(f"| environment probe, {name} | {rollouts:,} | {usd:.4f} | {seconds:.1f} | {share} |")
    print(f"| impossible variants | {variant[0]:,} | {variant[1]:.4f} | {variant[2]:.1f} | |")
    print(f"false passes on the variants: {passes} of {variant[0]}")


if __name__ == "__main__":
    main()
