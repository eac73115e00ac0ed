"""The too_hard diagnosis, stored with the band: suspect_verifier, truncated or hard, and its evidence.

The rule is engine.verifiers.diagnosis's; this module feeds it a version's stored rollouts and keeps
its answer on the calibration. calibrations_refresh calls `calibrations_diagnose_rows` wherever it
assigns bands, so a diagnosis follows every band change (new rounds, changed thresholds); the
`diagnose_too_hard` command fills in calibrations banded before diagnoses existed.
"""

from __future__ import annotations

import logging

from django.db.models import Q

from calibration.models import Band, Calibration, Outcome, ProbeModel, Rollout
from curation.models import TaskVersion
from engine.verifiers import diagnosis as too_hard_diagnosis
from engine.verifiers.base import shorten

logger = logging.getLogger(__name__)

# Rollouts that are attempts: a failed generation or a prompt too long for the model is not one.
NOT_ATTEMPTS = (Outcome.GENERATION_ERROR, Outcome.PROMPT_TOO_LONG)


def _attempts_by_version(*, ids: list[int], probe_model: ProbeModel) -> tuple[dict[int, list], set[int]]:
    """Per version id, its verified attempts under the model; and the versions with pruned rollouts."""
    attempts: dict[int, list[too_hard_diagnosis.Attempt]] = {version_id: [] for version_id in ids}
    pruned: set[int] = set()
    rows = (
        Rollout.objects.filter(task_version_id__in=ids, probe_model=probe_model, outcome__isnull=False)
        .exclude(outcome__in=NOT_ATTEMPTS)
        .order_by("task_version_id", "id")
        .values_list("id", "task_version_id", "text", "outcome", "truncated", "finish_reason", "pruned_at")
    )
    for rollout_id, version_id, text, outcome, truncated, finish_reason, pruned_at in rows.iterator(chunk_size=500):
        if pruned_at is not None:
            pruned.add(version_id)
        attempts[version_id].append(
            too_hard_diagnosis.Attempt(
                id=rollout_id, text=text, outcome=outcome, truncated=truncated or finish_reason == "length"
            )
        )
    return attempts, pruned


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


def calibrations_diagnose_rows(*, rows: list[Calibration], versions: dict[int, TaskVersion]) -> None:
    """Set `diagnosis` and `diagnosis_evidence` on unsaved calibration rows of one probe model: blank
    unless the band is too_hard. A version whose rollouts were pruned (texts dropped by retention)
    keeps the diagnosis it already had, since its texts can no longer show anything."""
    too_hard = [row for row in rows if row.band == Band.TOO_HARD]
    for row in rows:
        row.diagnosis, row.diagnosis_evidence = "", {}
    if not too_hard:
        return
    ids = [row.task_version_id for row in too_hard]
    attempts, pruned = _attempts_by_version(ids=ids, probe_model=too_hard[0].probe_model)
    stored = {}
    if pruned:
        stored = {
            version_id: (diagnosis, evidence)
            for version_id, diagnosis, evidence in Calibration.objects.filter(
                task_version_id__in=pruned, probe_model=too_hard[0].probe_model
            )
            .exclude(diagnosis="")
            .values_list("task_version_id", "diagnosis", "diagnosis_evidence")
        }
    for row in too_hard:
        if row.task_version_id in stored:
            row.diagnosis, row.diagnosis_evidence = stored[row.task_version_id]
            continue
        found = diagnosis_compute(version=versions[row.task_version_id], attempts=attempts[row.task_version_id])
        row.diagnosis, row.diagnosis_evidence = found.diagnosis, found.evidence


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
            calibrations_diagnose_rows(rows=rows, versions=versions)
            Calibration.objects.bulk_update(rows, ["diagnosis", "diagnosis_evidence"])
            diagnosed += len(rows)
    return diagnosed
