"""The too_hard diagnosis, stored with the band: suspect_verifier, truncated or hard, and its evidence.

The rule is engine.verifiers.diagnosis's; this module feeds it a version's stored rollouts and keeps
its answer on the calibration. calibrations_refresh calls `calibrations_diagnose_rows` wherever it
assigns bands, so a diagnosis follows every band change (new rounds, changed thresholds); the
`diagnose_too_hard` command fills in calibrations banded before diagnoses existed.
"""

from __future__ import annotations

import logging

from django.db.models import Count, Max, Q

from calibration.models import Band, Calibration, Outcome, ProbeModel, Rollout
from curation.models import TaskVersion
from engine.verifiers import diagnosis as too_hard_diagnosis
from engine.verifiers.base import shorten

logger = logging.getLogger(__name__)

# Rollouts that are attempts: a failed generation, a prompt too long for the model or a failed world is not one.
NOT_ATTEMPTS = (Outcome.GENERATION_ERROR, Outcome.PROMPT_TOO_LONG, Outcome.WORLD_ERROR)


def _attempts(*, version_ids: list[int], probe_model: ProbeModel):
    """The verified attempts of some versions under the model (failed generations are not attempts)."""
    return Rollout.objects.filter(
        task_version_id__in=version_ids, probe_model=probe_model, outcome__isnull=False
    ).exclude(outcome__in=NOT_ATTEMPTS)


def _attempts_by_version(*, ids: list[int], probe_model: ProbeModel) -> dict[int, list]:
    """Per version id, its attempts as the engine reads them, in id order."""
    attempts: dict[int, list[too_hard_diagnosis.Attempt]] = {version_id: [] for version_id in ids}
    rows = (
        _attempts(version_ids=ids, probe_model=probe_model)
        .order_by("task_version_id", "id")
        .values_list("id", "task_version_id", "text", "outcome", "truncated", "finish_reason")
    )
    for rollout_id, version_id, text, outcome, truncated, finish_reason in rows.iterator(chunk_size=500):
        attempts[version_id].append(
            too_hard_diagnosis.Attempt(
                id=rollout_id, text=text, outcome=outcome, truncated=truncated or finish_reason == "length"
            )
        )
    return attempts


def diagnosis_compute(*, version: TaskVersion, attempts: list) -> too_hard_diagnosis.Diagnosis:
    """The engine's diagnosis of one version from its attempts; a verifier that cannot be run (a config
    that no longer validates) leaves the evidence saying so and the task `hard` by its counts."""
    try:
        return too_hard_diagnosis.diagnose(
            verifier=version.verifier or {}, answer=version.answer, prompt=version.prompt, attempts=attempts
        )
    except Exception as error:  # noqa: BLE001 - a diagnosis must never stop a band from being stored
        logger.exception("diagnosing task version %s failed", version.pk)
        return too_hard_diagnosis.Diagnosis(
            too_hard_diagnosis.HARD,
            {"attempts": len(attempts), "reason": f"could not be diagnosed: {shorten(str(error), 160)}"},
        )


def calibrations_diagnose_rows(
    *, rows: list[Calibration], versions: dict[int, TaskVersion], recompute: bool = False
) -> None:
    """Set `diagnosis` and `diagnosis_evidence` on unsaved calibration rows of one probe model: blank
    unless the band is too_hard.

    A diagnosis depends only on the version (immutable) and its attempts, not on thresholds, so a stored
    one is kept while the attempts are the same ones (their count and latest id): re-banding a large
    environment reads no texts again; `recompute` diagnoses anyway (after the rule changed). A version
    whose rollouts were pruned (texts dropped by retention) keeps the diagnosis it had, since its texts
    can no longer show anything."""
    too_hard = [row for row in rows if row.band == Band.TOO_HARD]
    for row in rows:
        row.diagnosis, row.diagnosis_evidence = "", {}
    if not too_hard:
        return
    probe_model = too_hard[0].probe_model
    ids = [row.task_version_id for row in too_hard]
    seen = {
        row["task_version_id"]: row
        for row in _attempts(version_ids=ids, probe_model=probe_model)
        .values("task_version_id")
        .annotate(count=Count("id"), latest=Max("id"), pruned=Count("id", filter=Q(pruned_at__isnull=False)))
        .order_by()
    }
    stored = {
        version_id: (diagnosis, evidence)
        for version_id, diagnosis, evidence in Calibration.objects.filter(
            task_version_id__in=ids, probe_model=probe_model
        )
        .exclude(diagnosis="")
        .values_list("task_version_id", "diagnosis", "diagnosis_evidence")
    }
    to_compute = []
    for row in too_hard:
        now = seen.get(row.task_version_id, {"count": 0, "latest": None, "pruned": 0})
        previous = stored.get(row.task_version_id)
        if previous is not None and (now["pruned"] or (not recompute and _same_attempts(previous[1], now))):
            row.diagnosis, row.diagnosis_evidence = previous
        else:
            to_compute.append(row)
    if not to_compute:
        return
    attempts = _attempts_by_version(ids=[row.task_version_id for row in to_compute], probe_model=probe_model)
    for row in to_compute:
        version_attempts = attempts[row.task_version_id]  # in id order
        found = diagnosis_compute(version=versions[row.task_version_id], attempts=version_attempts)
        latest = version_attempts[-1].id if version_attempts else None
        row.diagnosis, row.diagnosis_evidence = found.diagnosis, {**found.evidence, "latest_rollout": latest}


def _same_attempts(evidence: dict, now: dict) -> bool:
    """Whether a stored diagnosis was made from the attempts there are now (same count, same latest id)."""
    return (evidence.get("attempts"), evidence.get("latest_rollout")) == (now["count"], now["latest"])


def too_hard_diagnose(*, only_missing: bool = True, chunk_size: int = 200) -> int:
    """Diagnose stored too_hard calibrations (those without a diagnosis, or all with `only_missing=False`),
    and blank the diagnosis of any calibration no longer too_hard. Returns how many were diagnosed."""
    Calibration.objects.filter(~Q(band=Band.TOO_HARD), ~Q(diagnosis="")).update(diagnosis="", diagnosis_evidence={})
    pending = Calibration.objects.filter(band=Band.TOO_HARD)
    if only_missing:
        pending = pending.filter(diagnosis="")
    diagnosed = 0
    for probe_model_id in pending.values_list("probe_model_id", flat=True).distinct().order_by():
        ids = list(pending.filter(probe_model_id=probe_model_id).order_by("pk").values_list("pk", flat=True))
        for start in range(0, len(ids), chunk_size):
            rows = list(
                Calibration.objects.filter(pk__in=ids[start : start + chunk_size]).select_related("probe_model")
            )
            versions = TaskVersion.objects.in_bulk([row.task_version_id for row in rows])
            calibrations_diagnose_rows(rows=rows, versions=versions, recompute=not only_missing)
            Calibration.objects.bulk_update(rows, ["diagnosis", "diagnosis_evidence"])
            diagnosed += len(rows)
    return diagnosed
