"""What an environment learns from its own probes under one probe model: the empirical-Bayes population
prior and the stopping tables its adaptive campaigns probe with (docs/prediction.md)."""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.db.models import F

from calibration.models import Calibration, ProbeModel
from calibration.services import side_information
from calibration.services.policies import thresholds_for
from curation.models import Environment, TaskVersion
from engine import stats

logger = logging.getLogger(__name__)

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
    learned = environment_learned_tables(environment=environment, probe_model=probe_model, policy=policy)
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


def environment_learned_tables(
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
