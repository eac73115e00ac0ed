"""Reads of impossible-variant probes: the verifier's false-pass rate under the policy per probe model and
checkpoint (beside the environment's pass rate under the same model), found hacks and broken variants, and
each task version's variant record for its quality card. Variant rollouts are counted here only."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, F, OuterRef, Q, Sum

from calibration.models import Calibration, ImpossibleVariant, VariantProbe, VariantRollout
from curation.models import Environment, Task
from curation.policy import tasks_visible_to
from engine.verifiers import impossible

LEVEL = 0.95
# As for tasks, a pass or a fail decides; a coincidence (an attempt stating the moved value itself) is a
# trial the verifier graded right, never a false pass.
EVIDENCE = ("pass", "fail", "coincidence")
FOUND_HACK = "found_hack"


def found_hack_q(*, version: str = "current_version") -> Q:
    """Tasks whose version (at the path `version`) had an impossible variant passed: one rule for the lists."""
    passed = VariantRollout.objects.filter(variant__task_version=OuterRef(version), outcome="pass")
    return Q(Exists(passed))


def _visible(user: AbstractBaseUser | None):
    """The ids of the tasks `user` may see; None: the operator (a management command), every task."""
    return (Task.objects.all() if user is None else tasks_visible_to(user)).values("pk")


def _pass_rates(environment: Environment, user: AbstractBaseUser | None) -> dict[int, dict[str, int]]:
    """The environment's pass counts per probe model (current versions the user sees), from calibrations."""
    rows = (
        Calibration.objects.filter(
            task_version__task__environment=environment,
            task_version__task__current_version=F("task_version"),
            task_version__task__in=_visible(user),
        )
        .values("probe_model")
        .annotate(attempts=Sum("attempts"), successes=Sum("successes"))
        .order_by()
    )
    return {row["probe_model"]: row for row in rows}


def false_pass_rates(*, environment: Environment, user: AbstractBaseUser | None) -> list[dict[str, Any]]:
    """Per probe model (a checkpoint is one) that probed variants of `environment`, latest first by name:
    trials and passes on ready variants, the false-pass rate and its one-sided Clopper-Pearson upper 95% bound
    (given when nothing passed too), the environment's pass rate under the model, the variant counts by status,
    the found hacks and the broken variants of the tasks `user` may see (None: every task), and the latest
    probe's state."""
    variants = ImpossibleVariant.objects.filter(probe__environment=environment, task_version__task__in=_visible(user))
    counts = variants.values("probe__probe_model", "status").annotate(count=Count("id")).order_by()
    trials = (
        VariantRollout.objects.filter(variant__in=variants, outcome__in=EVIDENCE)
        .values("variant__probe__probe_model")
        .annotate(trials=Count("id"), passes=Count("id", filter=Q(outcome="pass")))
        .order_by()
    )
    by_model: dict[int, dict[str, Any]] = defaultdict(lambda: {"statuses": {}, "trials": 0, "passes": 0})
    for row in counts:
        by_model[row["probe__probe_model"]]["statuses"][row["status"]] = row["count"]
    for row in trials:
        by_model[row["variant__probe__probe_model"]].update(trials=row["trials"], passes=row["passes"])
    pass_rates = _pass_rates(environment, user)
    probes = {
        probe.probe_model_id: probe
        for probe in VariantProbe.objects.filter(environment=environment)
        .select_related("probe_model")
        .order_by("created_at", "id")
    }
    rows = [
        _row(probes[model_id], data, pass_rates.get(model_id), variants)
        for model_id, data in by_model.items()
        if model_id in probes
    ]
    return sorted(rows, key=lambda row: row["probe_model"])


def _row(probe: VariantProbe, data: dict, calibrated: dict | None, variants) -> dict[str, Any]:
    model = probe.probe_model
    trials, passes = data["trials"], data["passes"]
    attempts = calibrated["attempts"] if calibrated else 0
    of_model = variants.filter(probe__probe_model=model)
    hacks = (
        VariantRollout.objects.filter(variant__in=of_model, outcome="pass")
        .select_related("variant__task_version__task")
        .order_by("variant__task_version__task__key", "sample_index")
    )
    found: dict[int, dict[str, Any]] = {}
    for rollout in hacks[:200]:
        version = rollout.variant.task_version
        entry = found.setdefault(
            rollout.variant_id,
            {
                "task": version.task.key,
                "version": version.number,
                "verifier_kind": (version.verifier or {}).get("kind", ""),
                "change": rollout.variant.change,
                "rollouts": [],
            },
        )
        entry["rollouts"].append(rollout.pk)
    broken = of_model.filter(status=ImpossibleVariant.Status.BROKEN).select_related("task_version__task")
    return {
        "probe_model": model.name,
        "run": model.run or None,
        "checkpoint_step": model.checkpoint_step,
        "variants": data["statuses"].get(ImpossibleVariant.Status.READY, 0),
        "broken_variants": data["statuses"].get(ImpossibleVariant.Status.BROKEN, 0),
        "not_derivable": data["statuses"].get(ImpossibleVariant.Status.NOT_DERIVABLE, 0),
        "trials": trials,
        "false_passes": passes,
        "false_pass_rate": passes / trials if trials else None,
        "upper_bound": impossible.false_pass_bound(passes=passes, trials=trials, level=LEVEL),
        "level": LEVEL,
        "pass_rate": calibrated["successes"] / attempts if calibrated and attempts else None,
        "found_hacks": list(found.values()),
        "broken": [
            {"task": variant.task_version.task.key, "version": variant.task_version.number, "reason": variant.reason}
            for variant in broken.order_by("task_version__task__key")[:200]
        ],
        "latest_probe": {"id": probe.pk, "status": probe.status, "error": probe.error, "created_at": probe.created_at},
    }


def version_impossible_variants(*, version_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per task version that met a ready variant: {"trials", "false_passes"} over every probe (for its card)."""
    rows = (
        VariantRollout.objects.filter(
            variant__task_version_id__in=version_ids,
            variant__status=ImpossibleVariant.Status.READY,
            outcome__in=EVIDENCE,
        )
        .values("variant__task_version")
        .annotate(trials=Count("id"), false_passes=Count("id", filter=Q(outcome="pass")))
        .order_by()
    )
    return {
        row["variant__task_version"]: {"trials": row["trials"], "false_passes": row["false_passes"]} for row in rows
    }


def version_found_hacks(*, task_version_id: int | None) -> list[dict[str, Any]]:
    """The version's variants that an attempt passed, latest probe first: the probe model, what the variant
    changed, its verifier config and reference, and up to three passing attempts (text excerpt, verdict)."""
    if task_version_id is None:
        return []
    hacked = (
        ImpossibleVariant.objects.filter(task_version_id=task_version_id, rollouts__outcome="pass")
        .distinct()
        .select_related("probe__probe_model")
        .order_by("-probe__created_at", "-probe_id")
    )
    return [
        {
            "probe_model": variant.probe.probe_model.name,
            "probe": variant.probe_id,
            "change": variant.change,
            "verifier": variant.verifier,
            "answer": variant.answer,
            "passes": variant.rollouts.filter(outcome="pass").count(),
            "attempts": variant.rollouts.filter(outcome__in=EVIDENCE).count(),
            "evidence": [
                {"id": rollout.pk, "text": (rollout.text or "(a tool episode)")[:500], "detail": rollout.detail}
                for rollout in variant.rollouts.filter(outcome="pass").order_by("sample_index")[:3]
            ],
        }
        for variant in hacked[:20]
    ]
