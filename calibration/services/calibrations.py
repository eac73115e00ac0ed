"""Calibrations: the refresh that stores each task version's band from its rollouts, and the re-banding
of an environment when its thresholds change.

The band rule itself lives in engine.stats; this module gathers the counts and stores the verdict. The
priors and learned tables it probes with: calibration.services.learning; the policies: .policies."""

from __future__ import annotations

import logging
from decimal import ROUND_HALF_UP, Decimal
from typing import cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.audit import audit_record_many
from accounts.models import AuditEvent
from calibration.models import (
    Band,
    Calibration,
    Campaign,
    ProbeModel,
    Rollout,
    outcome_count_aggregates,
)
from calibration.services.diagnosis import calibrations_diagnose_rows
from calibration.services.learning import LearnedTables, environment_learned_tables, environment_prior
from calibration.services.policies import PREDICTED_POLICY, sampling_policy, thresholds_for
from curation.models import Environment, TaskVersion
from curation.thresholds import thresholds_validate
from engine import stats

logger = logging.getLogger(__name__)
CALIBRATION_COST_PLACES = Decimal("0.000001")

# Marks "compute the environment's population prior here" in calibration_refresh.
_POPULATION_PRIOR = object()

# The counts of a version with no rollouts yet.
_NO_ROLLOUTS = {
    "successes": 0,
    "failures": 0,
    "verifier_errors": 0,
    "tampered": 0,
    "generation_errors": 0,
    "world_errors": 0,
    "cost": None,
}


def calibration_refresh(
    *,
    task_version: TaskVersion,
    probe_model: ProbeModel,
    policy: dict | None = None,
    population_prior: stats.Beta | None | object = _POPULATION_PRIOR,
) -> Calibration:
    """Recompute one calibration from every stored rollout of this model on this version, with the
    diagnosis of a too_hard band (calibration.services.diagnosis).

    `policy` is the campaign's sampling policy; None keeps the one stored on the calibration
    (e.g. when an environment's thresholds change and bands are recomputed without inference).
    The prior is the policy's own `prior` (a ladder prior) when it has one, else the
    environment's population prior (pass `population_prior` to reuse one fitted already; None
    means Jeffreys).
    """
    return calibrations_refresh(
        task_versions=[task_version],
        probe_model=probe_model,
        policies=None if policy is None else {task_version.pk: policy},
        population_prior=population_prior,
    )[task_version.pk]


CALIBRATION_FIELDS = (
    "attempts",
    "successes",
    "verifier_errors",
    "tampered",
    "generation_errors",
    "pass_rate",
    "interval_low",
    "interval_high",
    "band",
    "decided",
    "grpo_signal",
    "cost_usd",
    "flags",
    "policy",
    "diagnosis",
    "diagnosis_evidence",
    "predicted_probability",
    "updated_at",
)


class _Priors:
    """The prior and learned table of each version in one refresh, each fitted once per environment:
    `population_prior` is a prior given by the caller, or _POPULATION_PRIOR to fit the environment's."""

    def __init__(self, *, probe_model: ProbeModel, population_prior: stats.Beta | None | object):
        self.probe_model = probe_model
        self.population_prior = population_prior
        self.fitted: dict[int, stats.Beta | None] = {}
        self.learned: dict[tuple, LearnedTables | None] = {}

    def prior(self, version: TaskVersion, policy: dict) -> stats.Beta:
        """The policy's own (ladder) prior, else the environment's population prior, else Jeffreys."""
        if policy.get("prior"):
            return stats.Beta(*policy["prior"])
        if self.population_prior is not _POPULATION_PRIOR:
            population = cast("stats.Beta | None", self.population_prior)
        else:
            environment = version.task.environment
            if environment.pk not in self.fitted:
                self.fitted[environment.pk] = environment_prior(
                    environment=environment, probe_model=self.probe_model, cached=True
                )
            population = self.fitted[environment.pk]
        return population or stats.JEFFREYS_PRIOR

    def table(self, version: TaskVersion, policy: dict) -> stats.StoppingTable | None:
        """The learned table the version follows under `policy`; None: the calibrated rule."""
        if policy.get("prior") or policy.get("kind") != Campaign.Policy.ADAPTIVE:
            return None  # a ladder prior's campaign, or fixed N: the rule, as stored
        sampling = sampling_policy(policy, attempts=0)
        environment = version.task.environment
        key = (environment.pk, sampling)
        if key not in self.learned:
            self.learned[key] = environment_learned_tables(
                environment=environment, probe_model=self.probe_model, policy=sampling
            )
        tables = self.learned[key]
        return None if tables is None else tables.table_for(version.task_id, version)


def calibrations_refresh(
    *,
    task_versions: list[TaskVersion],
    probe_model: ProbeModel,
    policies: dict[int, dict] | None = None,
    population_prior: stats.Beta | None | object = _POPULATION_PRIOR,
) -> dict[int, Calibration]:
    """`calibration_refresh` for many versions of one environment in a fixed number of queries.

    `policies` maps a version id to its policy; versions without one keep their stored policy.
    Returns the calibrations by version id.
    """
    if not task_versions:
        return {}
    ids = [version.pk for version in task_versions]
    counts = _rollout_counts(ids=ids, probe_model=probe_model)
    policies = _policies_with_stored(ids=ids, probe_model=probe_model, policies=policies or {})
    # A predicted band has no rollouts to recompute it from: it stays as predicted until probed.
    kept = {pk for pk in ids if policies[pk].get("kind") == PREDICTED_POLICY and pk not in counts}
    if kept:
        task_versions = [version for version in task_versions if version.pk not in kept]
        ids = [pk for pk in ids if pk not in kept]
    priors = _Priors(probe_model=probe_model, population_prior=population_prior)
    now = timezone.now()
    rows = [
        _calibration_row(
            version=version,
            probe_model=probe_model,
            counts=counts.get(version.pk, _NO_ROLLOUTS),
            policy=policies[version.pk],
            prior=priors.prior(version, policies[version.pk]),
            now=now,
            table=priors.table(version, policies[version.pk]),
        )
        for version in task_versions
    ]
    # Where bands are assigned, so a too_hard task's diagnosis changes with its band.
    calibrations_diagnose_rows(rows=rows, versions={version.pk: version for version in task_versions})
    bands_before = dict(
        Calibration.objects.filter(task_version_id__in=ids, probe_model=probe_model).values_list(
            "task_version_id", "band"
        )
    )
    Calibration.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["task_version", "probe_model"],
        update_fields=list(CALIBRATION_FIELDS),
    )
    _band_changes_record(rows=rows, before=bands_before, versions=task_versions, probe_model=probe_model)
    stored = {
        calibration.task_version_id: calibration
        for calibration in Calibration.objects.filter(task_version_id__in=kept, probe_model=probe_model)
    }
    if any(row.pk is None for row in rows):  # backends that do not return ids on conflict
        return stored | {
            calibration.task_version_id: calibration
            for calibration in Calibration.objects.filter(task_version_id__in=ids, probe_model=probe_model)
        }
    return stored | {row.task_version_id: row for row in rows}


def _band_changes_record(
    *, rows: list[Calibration], before: dict[int, str], versions: list[TaskVersion], probe_model: ProbeModel
) -> None:
    """The audit log's band changes: a calibration whose band is not what it was (a first band only once
    it is decided)."""
    by_id = {version.pk: version for version in versions}
    events = []
    for row in rows:
        was = before.get(row.task_version_id)
        if row.band == was or (was is None and row.band == Band.UNDECIDED):
            continue
        version = by_id[row.task_version_id]
        events.append(
            AuditEvent(
                action="band_change",
                object_kind="task",
                object_id=version.task_id,
                object_label=str(version.task)[:300],
                detail={"from": was, "to": row.band, "model": probe_model.name, "version": version.number},
            )
        )
    if events:
        audit_record_many(events)


def _rollout_counts(*, ids: list[int], probe_model: ProbeModel) -> dict[int, dict]:
    """Per version id: its rollouts' passes, fails, verifier and generation errors, and their cost."""
    return {
        row["task_version"]: row
        for row in Rollout.objects.filter(task_version_id__in=ids, probe_model=probe_model)
        .values("task_version")
        .annotate(
            **outcome_count_aggregates(),
            cost=Sum("cost_usd"),
        )
        .order_by()
    }


def _policies_with_stored(*, ids: list[int], probe_model: ProbeModel, policies: dict[int, dict]) -> dict[int, dict]:
    """`policies`, with the stored policy (or {}) of every version id it lacks."""
    policies = dict(policies)
    missing = [version_id for version_id in ids if version_id not in policies]
    if missing:
        stored = dict(
            Calibration.objects.filter(task_version_id__in=missing, probe_model=probe_model).values_list(
                "task_version_id", "policy"
            )
        )
        policies.update({version_id: stored.get(version_id) or {} for version_id in missing})
    return policies


def _calibration_row(
    *,
    version: TaskVersion,
    probe_model: ProbeModel,
    counts: dict,
    policy: dict,
    prior: stats.Beta,
    now,
    table: stats.StoppingTable | None = None,
) -> Calibration:
    attempts = counts["successes"] + counts["failures"]
    verdict = stats.calibration_verdict(
        successes=counts["successes"],
        attempts=attempts,
        verifier_errors=counts["verifier_errors"],
        generation_errors=counts["generation_errors"],
        world_errors=counts.get("world_errors", 0),
        thresholds=thresholds_for(version.task.environment),
        policy=sampling_policy(policy, attempts=attempts),
        prior=prior,
        verifier_trouble_share=settings.PASSBAND_VERIFIER_TROUBLE_SHARE,
        strong_model=probe_model.strong,
        audit_passed=bool(version.audit_passed),
        table=table,
    )
    return Calibration(
        task_version=version,
        probe_model=probe_model,
        attempts=attempts,
        successes=counts["successes"],
        verifier_errors=counts["verifier_errors"],
        tampered=counts.get("tampered", 0),
        generation_errors=counts["generation_errors"],
        pass_rate=verdict.pass_rate,
        interval_low=verdict.interval_low,
        interval_high=verdict.interval_high,
        band=verdict.band,
        decided=verdict.decided,
        grpo_signal=verdict.grpo_signal,
        # Rounded here, half up, to the column's 6 places: PostgreSQL would round a half up and SQLite's
        # adapter to even, and one calibration must cost the same on both engines.
        cost_usd=Decimal(counts["cost"] or 0).quantize(CALIBRATION_COST_PLACES, rounding=ROUND_HALF_UP),
        flags=[str(flag) for flag in verdict.flags]
        + ([str(stats.Flag.PROMPT_TOO_LONG)] if counts.get("prompts_too_long") else [])
        + ([str(stats.Flag.TAMPERED)] if counts.get("tampered") else []),
        policy=policy,
        updated_at=now,
    )


def environment_calibrations_refresh(*, environment: Environment, chunk_size: int = 500) -> int:
    """Recompute every calibration of the environment's task versions from stored rollouts.

    No inference: each keeps its stored sampling policy (and ladder prior); the population prior
    is fitted once per probe model, and calibrations are rewritten `chunk_size` at a time. Returns
    how many calibrations were recomputed.
    """
    refreshed = 0
    for probe_model in ProbeModel.objects.filter(calibrations__task_version__task__environment=environment).distinct():
        prior = environment_prior(environment=environment, probe_model=probe_model)
        version_ids = list(
            Calibration.objects.filter(task_version__task__environment=environment, probe_model=probe_model)
            .order_by("task_version_id")
            .values_list("task_version_id", flat=True)
        )
        for start in range(0, len(version_ids), chunk_size):
            versions = list(
                TaskVersion.objects.filter(pk__in=version_ids[start : start + chunk_size]).select_related(
                    "task__environment"
                )
            )
            refreshed += len(
                calibrations_refresh(task_versions=versions, probe_model=probe_model, population_prior=prior)
            )
    return refreshed


def environment_thresholds_set(
    *, environment: Environment, floor: float, retire_at: float, by: AbstractBaseUser | None
) -> int:
    """Change an environment's floor and retirement threshold, then re-band its tasks.

    Validates them with curation.thresholds (ThresholdError naming the field). Bands are recomputed from
    the stored rollouts, with no new inference. Returns how many calibrations were recomputed.
    """
    floor, retire_at = thresholds_validate(floor=floor, retire_at=retire_at)
    with transaction.atomic():
        previous = (environment.floor, environment.retire_at)
        Environment.objects.filter(pk=environment.pk).update(floor=floor, retire_at=retire_at)
        environment.floor, environment.retire_at = floor, retire_at
        refreshed = environment_calibrations_refresh(environment=environment)
    logger.info(
        "thresholds of %s changed from floor=%s retire_at=%s to floor=%s retire_at=%s by %s; %d calibrations re-banded",
        environment.name,
        *previous,
        floor,
        retire_at,
        getattr(by, "username", "system"),
        refreshed,
    )
    return refreshed
