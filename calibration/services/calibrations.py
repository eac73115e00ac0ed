"""Calibrations: the population prior, the sampling policy, and the refresh that stores each band.

The band rule itself lives in engine.stats; this module gathers the counts and stores the verdict."""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from accounts.audit import audit_record_many
from accounts.models import AuditEvent
from calibration.models import (
    Band,
    Calibration,
    Campaign,
    Outcome,
    ProbeModel,
    Rollout,
    outcome_count_aggregates,
)
from calibration.services import side_information
from calibration.services.diagnosis import calibrations_diagnose_rows
from curation.models import Environment, TaskVersion
from curation.thresholds import thresholds_validate
from engine import stats

logger = logging.getLogger(__name__)

# A task whose verifier errors on more than settings.PASSBAND_VERIFIER_TROUBLE_SHARE of its verdicts
# is verifier trouble, not hard.
EVIDENCE = (Outcome.PASS, Outcome.FAIL)


def thresholds_for(environment: Environment) -> stats.Thresholds:
    return stats.Thresholds.with_default_zones(floor=environment.floor, retire_at=environment.retire_at)


def policy_for(campaign: Campaign) -> dict:
    """The sampling policy of a campaign, as stored on the calibrations it produces."""
    return {
        "kind": campaign.policy,
        "round_size": campaign.round_size,
        "max_rollouts": campaign.max_rollouts,
        "confidence": campaign.confidence,
    }


def sampling_policy(policy: dict, *, attempts: int) -> stats.SamplingPolicy:
    """The stopping rule's policy for a stored campaign policy (see policy_for) after `attempts`."""
    if policy.get("kind") == Campaign.Policy.ADAPTIVE:
        cap = max(policy["max_rollouts"], policy["round_size"])
        return stats.SamplingPolicy(
            kind="adaptive", round_size=policy["round_size"], cap=cap, confidence=policy.get("confidence", 0.95)
        )
    # Fixed N: the attempts there are (errors are not attempts, so a fixed-N campaign may end with
    # fewer than N), banded only where the stopping rule's claims hold on them; else undecided.
    return stats.SamplingPolicy(kind="fixed", fixed_n=max(1, attempts), confidence=policy.get("confidence", 0.95))


# Marks "compute the environment's population prior here" in calibration_refresh.
_POPULATION_PRIOR = object()


PRIOR_CACHE_SECONDS = 120


def environment_prior(*, environment: Environment, probe_model: ProbeModel, cached: bool = False) -> stats.Beta | None:
    """Empirical-Bayes prior of an environment's pass rates under one probe model, or None.

    Fitted on the fly (stats.fit_population_prior) from the calibrations of the environment's
    current task versions under this model; None (so Jeffreys) until PASSBAND_PRIOR_MIN_TASKS of
    them have attempts (0 turns it off). Computed rather than stored, so it always follows the
    latest evidence. `cached=True` (the per-round refresh) reuses a fit up to PRIOR_CACHE_SECONDS
    old, so a large environment is not re-read after every round of every task; "no prior yet"
    is not cached.
    """
    if settings.PASSBAND_PRIOR_MIN_TASKS <= 0:
        return None
    if cached:
        key = f"passband:environment-prior:{environment.pk}:{probe_model.pk}:{settings.PASSBAND_PRIOR_MIN_TASKS}"
        hit = cache.get(key)
        if hit is not None:
            return stats.Beta(*hit)
        prior = environment_prior(environment=environment, probe_model=probe_model)
        # Only a fitted prior is kept: while too few tasks have evidence, each refresh looks again
        # (a cheap query then), so the prior starts to count as soon as the evidence is there.
        if prior is not None:
            cache.set(key, list(prior), PRIOR_CACHE_SECONDS)
        return prior
    return stats.fit_population_prior(
        evidence=_environment_evidence(environment=environment, probe_model=probe_model),
        min_tasks=settings.PASSBAND_PRIOR_MIN_TASKS,
    )


def _environment_evidence(*, environment: Environment, probe_model: ProbeModel) -> list[tuple[int, int]]:
    """(successes, attempts) of each current task version of the environment with attempts under the model."""
    return [
        (successes, attempts)
        for _, successes, attempts in _environment_evidence_by_version(environment=environment, probe_model=probe_model)
    ]


def _environment_evidence_by_version(
    *, environment: Environment, probe_model: ProbeModel
) -> list[tuple[int, int, int]]:
    """(version id, successes, attempts) of each current task version with attempts under the model."""
    return list(
        Calibration.objects.filter(
            probe_model=probe_model,
            task_version__task__environment=environment,
            task_version__task__current_version=F("task_version"),
            attempts__gt=0,
        ).values_list("task_version_id", "successes", "attempts")
    )


LEARNED_TABLE_CACHE_SECONDS = 3600


def environment_learned_table(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    policy: stats.SamplingPolicy,
    task: int | None = None,
    version: TaskVersion | None = None,
) -> stats.StoppingTable | None:
    """The stopping table learned from the environment's own probes under one model, or None (the
    calibrated rule): the table task ``task`` (an id), at ``version``, follows; see
    ``environment_learning``."""
    learned = _environment_learned_tables(environment=environment, probe_model=probe_model, policy=policy)
    return None if learned is None else learned.table_for(task, version)


def environment_learning(
    *, environment: Environment, probe_model: ProbeModel, policy: stats.SamplingPolicy
) -> Learning | None:
    """What the environment learned from its own probes under ``probe_model``, once it has enough tasks
    to learn from: the tables it probes with, or none and why the calibrated rule was kept
    (stats.LearnedTable.reason: no table meets the limits, or one could harm a population the
    evidence allows). None below the minimum, with learning off, and for a fixed or non-calibrated
    policy. With PASSBAND_LEARNED_MIXTURE the learned policy may be a mixture of two tables
    (stats.search_prices); ``LearnedTables.table_for`` gives a task (by id) the one it follows.

    Side information (calibration.services.side_information): once the minimum of calibrated tasks
    have a score from a source (the declared difficulty, or the other probe models' results), one
    table per stratum of score is learned too, held to the same check, and a task with a score
    follows its stratum's table; ``strata_reason`` says why not when the strata keep the rule, and is
    None when too few tasks have a score."""
    entry = _learned_entry(environment=environment, probe_model=probe_model, policy=policy)
    if entry is None:
        return None
    strata: dict = entry.get("strata") or {}
    tables = None
    if "table" in entry or "tables" in strata:
        tables = LearnedTables(
            table=stats.table_from_lists(entry["table"]) if "table" in entry else None,
            cheaper=None if entry.get("cheaper") is None else stats.table_from_lists(entry["cheaper"]),
            share=entry.get("share", 0.0),
            cuts=tuple(strata.get("cuts", ())),
            strata=tuple(stats.table_from_lists(rows) for rows in strata.get("tables", ())),
            source=strata.get("source", ""),
            scores=strata.get("scores", {}),
        )
    return Learning(
        tables=tables, reason=entry["reason"], strata_reason=strata.get("reason"), strata_source=strata.get("source")
    )


def _environment_learned_tables(
    *, environment: Environment, probe_model: ProbeModel, policy: stats.SamplingPolicy
) -> LearnedTables | None:
    """The tables the environment probes with under one model, or None: the calibrated rule decides."""
    learning = environment_learning(environment=environment, probe_model=probe_model, policy=policy)
    return None if learning is None else learning.tables


def _learned_entry(*, environment: Environment, probe_model: ProbeModel, policy: stats.SamplingPolicy) -> dict | None:
    """The cached outcome of learning: {"reason"} when the rule is kept, with "table", "cheaper" and
    "share" when a table was learned; None when nothing is learned (off, too few tasks, a policy
    that is not learned). The fit and the search take seconds, so the outcome is cached for
    LEARNED_TABLE_CACHE_SECONDS per environment, model, thresholds and policy; "too few tasks" is not
    cached (a cheap count, so learning starts as soon as the evidence is there)."""
    minimum = settings.PASSBAND_LEARNED_MIN_TASKS
    if minimum <= 0 or policy.kind != "adaptive" or policy.rule != "calibrated":
        return None
    thresholds = thresholds_for(environment)
    key = (
        f"passband:learned-table:v6:{environment.pk}:{probe_model.pk}:{thresholds.floor}:{thresholds.retire_at}:"
        f"{policy.round_size}:{policy.cap}:{minimum}:{int(settings.PASSBAND_LEARNED_MIXTURE)}"
    )
    hit = cache.get(key)
    if hit is None:
        rows = _environment_evidence_by_version(environment=environment, probe_model=probe_model)
        if len(rows) < minimum:
            return None
        evidence = [(successes, attempts) for _, successes, attempts in rows]
        # The bootstrap resamples' seed comes from the environment's name, not its id: the same
        # evidence learns the same table on any database (ids depend on what was created first).
        seed = zlib.crc32(environment.name.encode())
        learned = stats.learned_table_from_evidence(
            evidence=evidence,
            thresholds=thresholds,
            policy=policy,
            seed=seed,
            min_tasks=minimum,
            mixture=settings.PASSBAND_LEARNED_MIXTURE,
        )
        logger.info(
            "learned table for %s under %s: %s (predicted %.1f rollouts, %.2f%% wrong; the rule: %.1f, %.2f%%)",
            environment.name,
            probe_model.name,
            learned.reason,
            learned.predicted.rollouts,
            100 * learned.predicted.error,
            learned.default_predicted.rollouts,
            100 * learned.default_predicted.error,
        )
        hit = {"reason": learned.reason}
        if learned.learned:
            hit.update(table=stats.table_to_lists(learned.table), cheaper=None, share=0.0)
            if learned.cheaper is not None:
                hit.update(cheaper=stats.table_to_lists(learned.cheaper), share=learned.cheaper_share)
        strata = side_information.strata_entry(
            rows=rows,
            scores=side_information.task_scores(environment=environment, probe_model=probe_model),
            thresholds=thresholds,
            policy=policy,
            seed=seed,
            minimum=minimum,
            name=environment.name,
            baseline=(learned.predicted if learned.learned else learned.default_predicted).rollouts,
        )
        if strata is not None:
            hit["strata"] = strata
        cache.set(key, hit, LEARNED_TABLE_CACHE_SECONDS)
    return hit


@dataclass(frozen=True)
class Learning:
    """An environment's learning outcome under one model: ``tables`` when it probes with learned
    tables, else None; ``reason``: "learned", or why the calibrated rule was kept for the table
    without side information; ``strata_reason``: the same for the tables per stratum of score, and
    ``strata_source``: the source of that score (None for both: no source scores enough calibrated
    tasks; calibration.services.side_information)."""

    tables: LearnedTables | None
    reason: str
    strata_reason: str | None = None
    strata_source: str | None = None


@dataclass(frozen=True)
class LearnedTables:
    """An environment's learned policy: ``table`` (None: the rule), and a ``cheaper`` one a ``share`` of
    tasks follow; with side information, ``strata``: one table per stratum of the ``source``'s score,
    split at ``cuts`` (ascending scores; the first table is the lowest, hardest, stratum's), and
    ``scores``: the source's score of each version id (the declared difficulty is read off the
    version itself, so a task imported since still finds its stratum)."""

    table: stats.StoppingTable | None
    cheaper: stats.StoppingTable | None
    share: float
    cuts: tuple[float, ...] = ()
    strata: tuple[stats.StoppingTable, ...] = ()
    source: str = ""
    scores: dict[int, float] = field(default_factory=dict)

    def score_of(self, version: TaskVersion) -> float | None:
        if self.source == side_information.DECLARED:
            return None if version.declared_difficulty is None else -version.declared_difficulty
        return self.scores.get(version.pk)

    def table_for(self, task: int | None, version: TaskVersion | None = None) -> stats.StoppingTable | None:
        score = None if version is None or not self.strata else self.score_of(version)
        if score is not None:
            # The stratum stats.StratifiedTables.stratum gives: the cuts at or below the score.
            return self.strata[sum(cut <= score for cut in self.cuts)]
        if task is not None and self.cheaper is not None and stats.follows_cheaper(task, self.share):
            return self.cheaper
        return self.table


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

# The stored policy of a band predicted for a checkpoint (calibration/services/checkpoints.py).
PREDICTED_POLICY = "predicted"


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
    zero = {
        "successes": 0,
        "failures": 0,
        "verifier_errors": 0,
        "tampered": 0,
        "generation_errors": 0,
        "world_errors": 0,
        "cost": None,
    }
    counts = _rollout_counts(ids=ids, probe_model=probe_model)
    policies = _policies_with_stored(ids=ids, probe_model=probe_model, policies=policies or {})
    # A predicted band has no rollouts to recompute it from: it stays as predicted until probed.
    kept = {pk for pk in ids if policies[pk].get("kind") == PREDICTED_POLICY and pk not in counts}
    if kept:
        task_versions = [version for version in task_versions if version.pk not in kept]
        ids = [pk for pk in ids if pk not in kept]
    fitted: dict[int, stats.Beta | None] = {}
    learned: dict[tuple, LearnedTables | None] = {}

    def learned_table(environment: Environment, policy: dict, version: TaskVersion) -> stats.StoppingTable | None:
        if policy.get("prior") or policy.get("kind") != Campaign.Policy.ADAPTIVE:
            return None  # a ladder prior's campaign, or fixed N: the rule, as stored
        sampling = sampling_policy(policy, attempts=0)
        key = (environment.pk, sampling)
        if key not in learned:
            learned[key] = _environment_learned_tables(
                environment=environment, probe_model=probe_model, policy=sampling
            )
        tables = learned[key]
        return None if tables is None else tables.table_for(version.task_id, version)

    def population(environment: Environment) -> stats.Beta | None:
        if population_prior is not _POPULATION_PRIOR:
            return cast("stats.Beta | None", population_prior)
        if environment.pk not in fitted:
            fitted[environment.pk] = environment_prior(environment=environment, probe_model=probe_model, cached=True)
        return fitted[environment.pk]

    now = timezone.now()
    rows = []
    for version in task_versions:
        policy = policies[version.pk]
        if policy.get("prior"):
            prior = stats.Beta(*policy["prior"])
        else:
            prior = population(version.task.environment) or stats.JEFFREYS_PRIOR
        rows.append(
            _calibration_row(
                version=version,
                probe_model=probe_model,
                counts=counts.get(version.pk, zero),
                policy=policy,
                prior=prior,
                now=now,
                table=learned_table(version.task.environment, policy, version),
            )
        )
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
        cost_usd=counts["cost"] or Decimal(0),
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
