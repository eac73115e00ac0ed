"""Writes for calibration: probe models, campaigns, rollouts and calibrations.

A campaign probes task versions in rounds. For each (campaign, task version) a round is:
generate the missing samples (queue `generate`), verify the unverified ones (queue `verify`),
refresh the calibration from the stored rows, then either schedule the next round or mark the
item done. One job takes a round of several task versions when sampling is a server request and
scoring is cheap (`tasks_per_job`). Every step reads what is stored and writes only what is
missing, so running any step twice, or after a worker was killed, records each planned rollout
exactly once; beat's reconcile re-queues rounds whose message was lost.
"""

from __future__ import annotations

import json
import logging
import random
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Callable

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Exists, F, Max, OuterRef, Q, Sum
from django.utils import timezone

from calibration.errors import CalibrationError
from calibration.models import (
    Band,
    Calibration,
    Campaign,
    CampaignItem,
    FeedbackReport,
    Outcome,
    ProbeModel,
    Rollout,
)
from curation.models import Environment, Task, TaskStatus, TaskVersion
from engine import backends, stats, verifiers
from engine.packing import pack_logprobs, pack_tokens

logger = logging.getLogger(__name__)

# A task whose verifier errors on more than settings.PASSBAND_VERIFIER_TROUBLE_SHARE of its verdicts
# is verifier trouble, not hard.
EVIDENCE = (Outcome.PASS, Outcome.FAIL)


def probe_model_add(
    *,
    name: str,
    backend: str,
    model: str = "",
    revision: str = "",
    base_url: str = "",
    api_key_env: str = "",
    temperature: float = 0.7,
    top_p: float = 0.95,
    max_new_tokens: int = 256,
    stop: list[str] | None = None,
    usd_per_gpu_hour: Decimal | float = 0,
    gpus: int = 1,
    usd_per_million_input_tokens: Decimal | float = 0,
    usd_per_million_output_tokens: Decimal | float = 0,
    strong: bool = False,
    samples_per_request: int = 1,
) -> ProbeModel:
    """Register a probe model. Raises CalibrationError for an unknown backend or a missing URL.

    `samples_per_request` > 1 (openai backend) sends a round's consecutive seeds as one request
    with n samples; only for servers that seed choice i with seed + i, as vLLM does.
    """
    if backend not in ProbeModel.Backend.values:
        raise CalibrationError(f"Unknown backend {backend!r}; use one of {', '.join(ProbeModel.Backend.values)}.")
    if backend == ProbeModel.Backend.OPENAI and not (base_url and model):
        raise CalibrationError("The openai backend needs --base-url and --model.")
    if ProbeModel.objects.filter(name=name).exists():
        raise CalibrationError(f"A probe model named {name!r} already exists.")
    if not 0 <= temperature <= 5 or not 0 < top_p <= 1 or max_new_tokens < 1:
        raise CalibrationError("Need 0 <= temperature <= 5, 0 < top_p <= 1 and max_new_tokens >= 1.")
    if not 1 <= samples_per_request <= 1024:
        raise CalibrationError(f"Samples per request must lie between 1 and 1024; got {samples_per_request}.")
    return ProbeModel.objects.create(
        name=name,
        backend=backend,
        model=model,
        revision=revision,
        base_url=base_url,
        api_key_env=api_key_env,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        stop=stop or [],
        usd_per_gpu_hour=Decimal(str(usd_per_gpu_hour)),
        gpus=gpus,
        usd_per_million_input_tokens=Decimal(str(usd_per_million_input_tokens)),
        usd_per_million_output_tokens=Decimal(str(usd_per_million_output_tokens)),
        strong=strong,
        samples_per_request=samples_per_request,
    )


def campaign_start(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    created_by: AbstractBaseUser,
    policy: str = Campaign.Policy.FIXED,
    rollouts: int = 8,
    round_size: int = 8,
    confidence: float = 0.95,
    seed: int | None = None,
    task_versions: list[TaskVersion] | None = None,
    enqueue: bool = True,
) -> Campaign:
    """Create a campaign over the environment's current task versions and queue its first rounds.

    `rollouts` is N per task for the fixed policy and the cap for the adaptive one.
    """
    if policy not in Campaign.Policy.values:
        raise CalibrationError(f"Unknown policy {policy!r}; use adaptive or fixed.")
    if rollouts < 1 or round_size < 1:
        raise CalibrationError("Rollouts and round size must be at least 1.")
    if not 0.5 < confidence < 1:
        raise CalibrationError(f"Confidence must lie between 0.5 and 1; got {confidence}.")
    if task_versions is None:
        task_versions = list(
            TaskVersion.objects.filter(
                pk__in=Task.objects.filter(environment=environment)
                .exclude(status__in=[TaskStatus.REJECTED])
                .values("current_version")
            )
        )
    if not task_versions:
        raise CalibrationError(f"Environment {environment.name!r} has no tasks to probe.")
    with transaction.atomic():
        campaign = Campaign.objects.create(
            environment=environment,
            probe_model=probe_model,
            created_by=created_by,
            policy=policy,
            seed=secrets.randbits(62) if seed is None else seed,
            round_size=round_size,
            max_rollouts=rollouts,
            confidence=confidence,
        )
        CampaignItem.objects.bulk_create(
            [CampaignItem(campaign=campaign, task_version=version) for version in task_versions]
        )
        if enqueue:
            transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign.pk))
    return campaign


def campaign_enqueue_pending(*, campaign_id: int, stalled_for_seconds: float = 0) -> int:
    """Queue the current round of every unfinished item (all of them, or those idle for a while).

    Items at the same round go out together, up to `tasks_per_job` per job. Safe to call at any
    time: a round that is already generated or verified is skipped by the workers. Returns how many
    items were queued.
    """
    from calibration.tasks import generate_rollouts

    campaign = Campaign.objects.select_related("probe_model").get(pk=campaign_id)
    items = CampaignItem.objects.filter(campaign_id=campaign_id, done=False)
    if stalled_for_seconds:
        items = items.filter(updated_at__lt=timezone.now() - timedelta(seconds=stalled_for_seconds))
    pending = list(
        items.order_by("round", "task_version_id").values_list(
            "task_version_id", "round", "task_version__verifier", "task_version__tools"
        )
    )
    groups: dict[tuple[int, int], list[int]] = {}
    for version_id, round_index, verifier, tools in pending:
        size = tasks_per_job(campaign.probe_model, verifier=verifier, tools=tools)
        groups.setdefault((round_index, size), []).append(version_id)
    for (round_index, size), version_ids in groups.items():
        for start in range(0, len(version_ids), size):
            generate_rollouts.delay(campaign_id, version_ids[start : start + size], round_index)
    return len(pending)


# Verifiers that score a rollout in process in well under a millisecond to a few: their rounds are
# batched. Code, judges and tool episodes take seconds per rollout and keep a job per task.
BATCHED_VERIFIER_KINDS = frozenset({"exact", "regex", "numeric", "math", "json", "tool_calls"})


def tasks_per_job(probe_model: ProbeModel, *, verifier: dict, tools: list | None) -> int:
    """How many task versions one generate (and verify) job takes on.

    Many, when sampling is a request to a server and scoring is cheap: the per-job costs (broker
    messages, queries) are then shared, and the server sees the whole batch at once. One, when the
    model runs in the worker or the verifier is slow, so no job grows past its time limit.
    """
    if probe_model.backend != ProbeModel.Backend.OPENAI or tools:
        return 1
    if (verifier or {}).get("kind") not in BATCHED_VERIFIER_KINDS:
        return 1
    return max(1, settings.PASSBAND_TASKS_PER_JOB)


def campaigns_reconcile(*, stalled_for_seconds: float | None = None) -> int:
    """Re-queue rounds of running campaigns idle for `stalled_for_seconds` (default
    settings.PASSBAND_STALLED_AFTER); run by beat. Returns how many items were queued."""
    if stalled_for_seconds is None:
        stalled_for_seconds = settings.PASSBAND_STALLED_AFTER
    queued = 0
    for campaign_id in Campaign.objects.filter(status=Campaign.Status.RUNNING).values_list("pk", flat=True):
        if not campaign_finish_if_done(campaign_id=campaign_id):
            queued += campaign_enqueue_pending(campaign_id=campaign_id, stalled_for_seconds=stalled_for_seconds)
    return queued


def round_indices(campaign: Campaign, round_index: int) -> range:
    """Sample indices of one round: [round * round_size, min(next round, max_rollouts))."""
    start = round_index * campaign.round_size
    return range(start, min(start + campaign.round_size, campaign.max_rollouts))


def _rollout_cost(probe_model: ProbeModel, *, device_ms: float | None, input_tokens, output_tokens) -> Decimal:
    """Dollars for one rollout: its share of device time at the GPU-hour price, plus token prices."""
    cost = Decimal(0)
    if probe_model.usd_per_gpu_hour and device_ms:
        hours = Decimal(str(device_ms)) / Decimal(3_600_000)
        cost += hours * probe_model.usd_per_gpu_hour * probe_model.gpus
    if input_tokens:
        cost += Decimal(input_tokens) * probe_model.usd_per_million_input_tokens / Decimal(1_000_000)
    if output_tokens:
        cost += Decimal(output_tokens) * probe_model.usd_per_million_output_tokens / Decimal(1_000_000)
    return cost.quantize(Decimal("0.00000001"))


def backend_for_probe_model(probe_model: ProbeModel) -> backends.Backend:
    return backends.backend_for(
        kind=probe_model.backend,
        model=probe_model.model,
        base_url=probe_model.base_url,
        api_key_env=probe_model.api_key_env,
        revision=probe_model.revision,
        samples_per_request=probe_model.samples_per_request,
    )


def sampling_params(probe_model: ProbeModel) -> backends.SamplingParams:
    return backends.SamplingParams(
        temperature=probe_model.temperature,
        top_p=probe_model.top_p,
        max_new_tokens=probe_model.max_new_tokens,
        stop=tuple(probe_model.stop),
    )


def is_tool_task(version: TaskVersion) -> bool:
    """A task whose rollouts are tool-use episodes: it declares tools and a tool environment."""
    return bool(version.tools) and bool((version.verifier or {}).get("environment"))


def _episodes_generate(
    *, version: TaskVersion, probe_model: ProbeModel, seeds: list[int], params: backends.SamplingParams
) -> tuple[list[backends.Generation], list[dict]]:
    """One tool-use episode per seed (engine/episodes): a Generation summary and a transcript each."""
    from engine.episodes.runner import EpisodeLimits, run_episode

    backend = backend_for_probe_model(probe_model)
    limits = EpisodeLimits(
        max_turns=getattr(settings, "PASSBAND_EPISODE_MAX_TURNS", 6),
        max_completion_tokens=4 * params.max_new_tokens,
    )
    generations, episodes = [], []
    for seed in seeds:
        episode = run_episode(
            backend=backend,
            messages=version.prompt,
            tools=version.tools,
            environment=version.verifier["environment"],
            world_seed=int(version.verifier.get("seed", 0)),
            seed=seed,
            params=params,
            limits=limits,
        )
        generations.append(episode.generation)
        episodes.append(episode.transcript)
    return generations, episodes


def _version_ids(task_version_ids: int | list[int]) -> list[int]:
    # Jobs queued before batching carry one id.
    return [task_version_ids] if isinstance(task_version_ids, int) else list(task_version_ids)


def rollouts_generate(*, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> int:
    """Generate one round's missing samples for task versions of a campaign. Returns how many were stored.

    Only versions whose item is still open at `round_index` are sampled; samples already stored
    are not asked for again.
    """
    campaign = Campaign.objects.select_related("probe_model").get(pk=campaign_id)
    if campaign.status != Campaign.Status.RUNNING:
        return 0
    open_ids = set(
        CampaignItem.objects.filter(
            campaign=campaign, task_version_id__in=_version_ids(task_version_ids), done=False, round=round_index
        ).values_list("task_version_id", flat=True)
    )
    if not open_ids:
        return 0
    planned = round_indices(campaign, round_index)
    existing: dict[int, set[int]] = {}
    for version_id, index in Rollout.objects.filter(
        campaign=campaign, task_version_id__in=open_ids, sample_index__gte=planned.start, sample_index__lt=planned.stop
    ).values_list("task_version_id", "sample_index"):
        existing.setdefault(version_id, set()).add(index)
    work = []
    for version in TaskVersion.objects.filter(pk__in=open_ids).order_by("pk"):
        indices = [index for index in planned if index not in existing.get(version.pk, ())]
        if indices:
            work.append((version, indices))
    if not work:
        return 0
    probe_model = campaign.probe_model
    params = sampling_params(probe_model)
    sampling = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_new_tokens": params.max_new_tokens,
        "stop": list(params.stop),
        "backend": probe_model.backend,
        "model": probe_model.model or probe_model.name,
        "revision": probe_model.revision,
    }
    rows = []
    for version, indices, seeds, seconds, generations, episodes in _generate_all(
        campaign=campaign, probe_model=probe_model, params=params, work=work
    ):
        # The samples of a round share the device (one batch, or concurrent requests): each rollout is
        # charged an equal share of the round's wall time, not its own latency, so a batch is paid once.
        device_ms_per_rollout = seconds * 1000 / max(len(generations), 1)
        for index, seed, generation, episode in zip(indices, seeds, generations, episodes, strict=True):
            rows.append(
                _rollout_row(
                    campaign=campaign, version=version, sample_index=index, seed=seed, generation=generation,
                    episode=episode, sampling=sampling, device_ms=device_ms_per_rollout,
                )
            )
    return _rollouts_insert(rows)


# Columns a new rollout row fills, with the PostgreSQL array type each travels in (see _rollouts_insert).
_ROLLOUT_INSERT_COLUMNS = (
    ("campaign_id", "bigint"), ("task_version_id", "bigint"), ("probe_model_id", "bigint"), ("sample_index", "integer"),
    ("seed", "bigint"), ("prompt_token_ids", "bytea"), ("completion_token_ids", "bytea"), ("logprobs", "bytea"),
    ("text", "text"), ("finish_reason", "text"), ("truncated", "boolean"), ("sampling", "jsonb"),
    ("generation_error", "text"), ("input_tokens", "integer"), ("output_tokens", "integer"),
    ("generation_ms", "float8"), ("outcome", "text"), ("detail", "text"), ("cost_usd", "numeric"),
    ("created_at", "timestamptz"), ("episode", "jsonb"),
)


def _rollouts_insert(rows: list[Rollout]) -> int:
    """Insert new rollouts, skipping samples already stored; returns how many were inserted.

    The unique (campaign, task version, sample index) makes a retried job a no-op. On PostgreSQL the
    rows travel as one array per column through unnest(): one short statement instead of Django's
    VALUES list of rows x columns parameters, which costs more to build than to run.
    """
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        return len(Rollout.objects.bulk_create(rows, ignore_conflicts=True))
    now = timezone.now()
    for row in rows:
        row.created_at = now
    names = [name for name, _ in _ROLLOUT_INSERT_COLUMNS]
    columns = []
    for name, kind in _ROLLOUT_INSERT_COLUMNS:
        values = [getattr(row, name) for row in rows]
        if kind == "jsonb":  # as text: SQL NULL stays NULL, a JSON value is cast below
            values = [None if value is None else json.dumps(value) for value in values]
        columns.append(values)
    arrays = ", ".join(f"%s::{'text' if kind == 'jsonb' else kind}[]" for _, kind in _ROLLOUT_INSERT_COLUMNS)
    select = ", ".join(f"{name}::jsonb" if kind == "jsonb" else name for name, kind in _ROLLOUT_INSERT_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Rollout._meta.db_table} ({', '.join(names)}) "
            f"SELECT {select} FROM unnest({arrays}) AS new({', '.join(names)}) "
            "ON CONFLICT (campaign_id, task_version_id, sample_index) DO NOTHING",
            columns,
        )
        return cursor.rowcount


def _generate_all(
    *, campaign: Campaign, probe_model: ProbeModel, params: backends.SamplingParams, work: list[tuple[TaskVersion, list[int]]]
):
    """Sample every (version, indices) of `work`; yields (version, indices, seeds, seconds, generations, episodes).

    Plain prompts go to the backend together (a server sees the whole batch at once), and each
    version is charged the batch's wall time in proportion to its samples; tool-use episodes run
    one version after another.
    """
    seeds_of = {
        version.pk: [
            backends.rollout_seed(campaign_seed=campaign.seed, task_version_hash=version.content_hash, sample_index=index)
            for index in indices
        ]
        for version, indices in work
    }
    plain = [(version, indices) for version, indices in work if not is_tool_task(version)]
    episodic = [(version, indices) for version, indices in work if is_tool_task(version)]
    if plain:
        started = time.perf_counter()
        results = backend_for_probe_model(probe_model).generate_many(
            prompts=[(version.prompt, seeds_of[version.pk]) for version, _ in plain], params=params
        )
        elapsed, total = time.perf_counter() - started, sum(len(indices) for _, indices in plain)
        for (version, indices), generations in zip(plain, results, strict=True):
            seconds = elapsed * len(indices) / total
            yield version, indices, seeds_of[version.pk], seconds, generations, [None] * len(generations)
    for version, indices in episodic:
        started = time.perf_counter()
        generations, episodes = _episodes_generate(
            version=version, probe_model=probe_model, seeds=seeds_of[version.pk], params=params
        )
        yield version, indices, seeds_of[version.pk], time.perf_counter() - started, generations, episodes


def _rollout_row(
    *,
    campaign: Campaign,
    version: TaskVersion,
    sample_index: int,
    seed: int,
    generation: backends.Generation,
    episode: dict | None,
    sampling: dict,
    device_ms: float,
) -> Rollout:
    """The row of one sampled rollout (not saved): what the backend produced, its cost, and for a
    failed generation the outcome `generation_error` (an infrastructure error, never a verdict)."""
    probe_model = campaign.probe_model
    failed = generation.error is not None
    return Rollout(
        campaign=campaign,
        task_version=version,
        probe_model=probe_model,
        sample_index=sample_index,
        seed=seed,
        prompt_token_ids=pack_tokens(generation.prompt_token_ids),
        completion_token_ids=pack_tokens(generation.completion_token_ids),
        logprobs=pack_logprobs(generation.logprobs),
        text=generation.text,
        finish_reason=generation.finish_reason,
        truncated=generation.truncated,
        sampling=sampling,
        generation_error=generation.error or "",
        input_tokens=generation.input_tokens,
        output_tokens=generation.output_tokens,
        generation_ms=generation.latency_ms,
        outcome=Outcome.GENERATION_ERROR if failed else None,
        detail=f"generation failed: {generation.error}" if failed else "",
        episode=episode,
        cost_usd=_rollout_cost(
            probe_model, device_ms=device_ms, input_tokens=generation.input_tokens, output_tokens=generation.output_tokens
        ),
    )


def rollouts_verify(*, campaign_id: int, task_version_ids: int | list[int]) -> int:
    """Score every unverified rollout of some task versions in a campaign. Returns how many were scored."""
    ids = _version_ids(task_version_ids)
    versions = {version.pk: version for version in TaskVersion.objects.filter(pk__in=ids).only("verifier", "answer", "prompt")}
    pending = list(
        Rollout.objects.filter(campaign_id=campaign_id, task_version_id__in=ids, outcome__isnull=True)
        .only("id", "task_version_id", "text", "episode")
        .order_by("task_version_id", "sample_index")
    )
    now = timezone.now()
    for rollout in pending:
        version = versions[rollout.task_version_id]
        # A tool task's rollout is judged by its episode (the final state), not by its words.
        completion = rollout.episode if rollout.episode is not None else rollout.text
        verdict = verifiers.verify(
            verifier=version.verifier, completion=completion, answer=version.answer, prompt=version.prompt
        )
        rollout.outcome = verdict.outcome
        rollout.reward = verdict.reward
        rollout.detail = verdict.detail[:2000]
        rollout.verify_ms = verdict.latency_ms
        rollout.verified_at = now
    _verdicts_save(pending)
    return len(pending)


def _verdicts_save(rollouts: list[Rollout]) -> None:
    """Write verdicts in one statement. `outcome IS NULL` keeps a concurrent duplicate job from overwriting."""
    if not rollouts:
        return
    if connection.vendor != "postgresql":
        Rollout.objects.bulk_update(rollouts, ["outcome", "reward", "detail", "verify_ms", "verified_at"], batch_size=500)
        return
    # Django's bulk_update builds a CASE per column and row; unnest() of arrays is ~10x cheaper.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Rollout._meta.db_table} AS rollout
            SET outcome = verdict.outcome, reward = verdict.reward, detail = verdict.detail,
                verify_ms = verdict.verify_ms, verified_at = %s
            FROM unnest(%s::bigint[], %s::text[], %s::float8[], %s::text[], %s::float8[])
                AS verdict(id, outcome, reward, detail, verify_ms)
            WHERE rollout.id = verdict.id AND rollout.outcome IS NULL
            """,
            [
                rollouts[0].verified_at,
                [rollout.pk for rollout in rollouts],
                [rollout.outcome for rollout in rollouts],
                [rollout.reward for rollout in rollouts],
                [rollout.detail for rollout in rollouts],
                [rollout.verify_ms for rollout in rollouts],
            ],
        )


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


def _sampling_policy(policy: dict, *, attempts: int) -> stats.SamplingPolicy:
    if policy.get("kind") == Campaign.Policy.ADAPTIVE:
        cap = max(policy["max_rollouts"], policy["round_size"])
        return stats.SamplingPolicy(
            kind="adaptive", round_size=policy["round_size"], cap=cap, confidence=policy.get("confidence", 0.95)
        )
    # Fixed N, as papers do: label by the raw pass rate of the attempts there are (errors are
    # not attempts, so a fixed-N campaign may end with fewer than N).
    return stats.SamplingPolicy(kind="fixed", fixed_n=max(1, attempts))


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
    evidence = list(
        Calibration.objects.filter(
            probe_model=probe_model,
            task_version__task__environment=environment,
            task_version__task__current_version=F("task_version"),
            attempts__gt=0,
        ).values_list("successes", "attempts")
    )
    return stats.fit_population_prior(evidence=evidence, min_tasks=settings.PASSBAND_PRIOR_MIN_TASKS)


def calibration_refresh(
    *,
    task_version: TaskVersion,
    probe_model: ProbeModel,
    policy: dict | None = None,
    population_prior: stats.Beta | None | object = _POPULATION_PRIOR,
) -> Calibration:
    """Recompute one calibration from every stored rollout of this model on this version.

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


_CALIBRATION_FIELDS = (
    "attempts", "successes", "verifier_errors", "generation_errors", "pass_rate", "interval_low", "interval_high",
    "band", "decided", "grpo_signal", "cost_usd", "flags", "policy", "updated_at",
)


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
    zero = {"successes": 0, "failures": 0, "verifier_errors": 0, "generation_errors": 0, "cost": None}
    counts = {
        row["task_version"]: row
        for row in Rollout.objects.filter(task_version_id__in=ids, probe_model=probe_model)
        .values("task_version")
        .annotate(
            successes=Count("id", filter=Q(outcome=Outcome.PASS)),
            failures=Count("id", filter=Q(outcome=Outcome.FAIL)),
            verifier_errors=Count("id", filter=Q(outcome__in=[Outcome.ERROR, Outcome.TIMEOUT])),
            generation_errors=Count("id", filter=Q(outcome=Outcome.GENERATION_ERROR)),
            cost=Sum("cost_usd"),
        )
        .order_by()
    }
    policies = dict(policies or {})
    missing = [version_id for version_id in ids if version_id not in policies]
    if missing:
        stored = dict(
            Calibration.objects.filter(task_version_id__in=missing, probe_model=probe_model).values_list(
                "task_version_id", "policy"
            )
        )
        policies.update({version_id: stored.get(version_id) or {} for version_id in missing})
    fitted: dict[int, stats.Beta | None] = {}

    def population(environment: Environment) -> stats.Beta | None:
        if population_prior is not _POPULATION_PRIOR:
            return population_prior
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
                version=version, probe_model=probe_model, counts=counts.get(version.pk, zero), policy=policy, prior=prior, now=now
            )
        )
    Calibration.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["task_version", "probe_model"],
        update_fields=list(_CALIBRATION_FIELDS),
    )
    if any(row.pk is None for row in rows):  # backends that do not return ids on conflict
        return {
            calibration.task_version_id: calibration
            for calibration in Calibration.objects.filter(task_version_id__in=ids, probe_model=probe_model)
        }
    return {row.task_version_id: row for row in rows}


def _calibration_row(
    *, version: TaskVersion, probe_model: ProbeModel, counts: dict, policy: dict, prior: stats.Beta, now
) -> Calibration:
    attempts = counts["successes"] + counts["failures"]
    verdict = stats.calibration_verdict(
        successes=counts["successes"],
        attempts=attempts,
        verifier_errors=counts["verifier_errors"],
        generation_errors=counts["generation_errors"],
        thresholds=thresholds_for(version.task.environment),
        policy=_sampling_policy(policy, attempts=attempts),
        prior=prior,
        verifier_trouble_share=settings.PASSBAND_VERIFIER_TROUBLE_SHARE,
        strong_model=probe_model.strong,
        audit_passed=bool(version.audit_passed),
    )
    return Calibration(
        task_version=version,
        probe_model=probe_model,
        attempts=attempts,
        successes=counts["successes"],
        verifier_errors=counts["verifier_errors"],
        generation_errors=counts["generation_errors"],
        pass_rate=verdict.pass_rate,
        interval_low=verdict.interval_low,
        interval_high=verdict.interval_high,
        band=verdict.band,
        decided=verdict.decided,
        grpo_signal=verdict.grpo_signal,
        cost_usd=counts["cost"] or Decimal(0),
        flags=[str(flag) for flag in verdict.flags],
        policy=policy,
        updated_at=now,
    )


def campaign_items_advance(*, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> list[int]:
    """After a round is verified: refresh the calibrations, then finish each item or open its next round.

    Returns the versions whose next round this call opened (the caller queues them). Only items
    whose round is complete move, and they move by compare-and-swap on the round, so a retried or
    duplicated job cannot open a round twice.
    """
    campaign = Campaign.objects.select_related("probe_model", "environment").get(pk=campaign_id)
    ids = _version_ids(task_version_ids)
    versions = list(TaskVersion.objects.filter(pk__in=ids).select_related("task__environment").order_by("pk"))
    item_priors = dict(
        CampaignItem.objects.filter(campaign=campaign, task_version_id__in=ids).values_list("task_version_id", "prior")
    )
    policies = {}
    for version in versions:
        policies[version.pk] = policy_for(campaign)
        if item_priors.get(version.pk):
            policies[version.pk]["prior"] = item_priors[version.pk]  # stored on the calibration, so a threshold change keeps it
    calibrations = calibrations_refresh(task_versions=versions, probe_model=campaign.probe_model, policies=policies)
    planned = round_indices(campaign, round_index)
    rounds = {
        row["task_version"]: row
        for row in Rollout.objects.filter(
            campaign=campaign, task_version_id__in=ids, sample_index__gte=planned.start, sample_index__lt=planned.stop
        )
        .values("task_version")
        .annotate(stored=Count("id"), unverified=Count("id", filter=Q(outcome__isnull=True)))
        .order_by()
    }
    finished, unfinished = [], []
    for version in versions:
        row = rounds.get(version.pk)
        if row is None or row["stored"] < len(planned) or row["unverified"]:
            continue  # the round is not complete yet; its own jobs will come back here
        done = planned.stop >= campaign.max_rollouts or (
            campaign.policy == Campaign.Policy.ADAPTIVE and calibrations[version.pk].band != Band.UNDECIDED
        )
        (finished if done else unfinished).append(version.pk)
    opened: list[int] = []
    if unfinished and campaign.status == Campaign.Status.RUNNING:
        opened = _items_next_round(campaign_id=campaign.pk, task_version_ids=unfinished, round_index=round_index)
    if finished:
        CampaignItem.objects.filter(
            campaign=campaign, task_version_id__in=finished, round=round_index, done=False
        ).update(done=True, updated_at=timezone.now())
        campaign_finish_if_done(campaign_id=campaign.pk)
    return opened


def campaign_finish_if_done(*, campaign_id: int) -> bool:
    """Mark a running campaign done when none of its items is open; True if this call did.

    Run after the items' own update has committed, as one statement: of two jobs that close the
    last items at the same moment, the one that commits last then sees every item closed. (Checked
    inside each job's transaction, neither would see the other's items, and neither would finish.)
    """
    open_items = CampaignItem.objects.filter(campaign=OuterRef("pk"), done=False)
    return bool(
        Campaign.objects.filter(pk=campaign_id, status=Campaign.Status.RUNNING)
        .filter(~Exists(open_items))
        .update(status=Campaign.Status.DONE, finished_at=timezone.now())
    )


def _items_next_round(*, campaign_id: int, task_version_ids: list[int], round_index: int) -> list[int]:
    """Move items from `round_index` to the next round; returns the versions this call moved."""
    table = CampaignItem._meta.db_table
    placeholders = ", ".join(["%s"] * len(task_version_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET round = round + 1, updated_at = %s "
            f"WHERE campaign_id = %s AND round = %s AND NOT done AND task_version_id IN ({placeholders}) "
            "RETURNING task_version_id",
            [timezone.now(), campaign_id, round_index, *task_version_ids],
        )
        return sorted(row[0] for row in cursor.fetchall())


def campaign_set_status(*, campaign: Campaign, status: str) -> Campaign:
    """Pause, resume or cancel a campaign. Resuming queues the unfinished items again."""
    allowed = {
        Campaign.Status.PAUSED: {Campaign.Status.RUNNING},
        Campaign.Status.RUNNING: {Campaign.Status.PAUSED},
        Campaign.Status.CANCELLED: {Campaign.Status.RUNNING, Campaign.Status.PAUSED},
    }
    if campaign.status not in allowed.get(status, set()):
        raise CalibrationError(f"A {campaign.status} campaign cannot become {status}.")
    with transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk).update(
            status=status, finished_at=timezone.now() if status == Campaign.Status.CANCELLED else None
        )
        if status == Campaign.Status.RUNNING:
            transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign.pk))
    campaign.refresh_from_db()
    return campaign


def campaign_run_inline(*, campaign: Campaign, progress: Callable[[int, int], None] | None = None) -> Campaign:
    """Run a whole campaign in this process, without a broker: the same steps the workers run."""
    items = list(CampaignItem.objects.filter(campaign=campaign, done=False).values_list("task_version_id", "round"))
    for position, (version_id, round_index) in enumerate(items, start=1):
        while True:
            rollouts_generate(campaign_id=campaign.pk, task_version_ids=[version_id], round_index=round_index)
            rollouts_verify(campaign_id=campaign.pk, task_version_ids=[version_id])
            if not campaign_items_advance(campaign_id=campaign.pk, task_version_ids=[version_id], round_index=round_index):
                break
            round_index += 1
        if progress:
            progress(position, len(items))
    campaign.refresh_from_db()
    return campaign


# ---------------------------------------------------------------------------------------------
# Thresholds per environment
# ---------------------------------------------------------------------------------------------


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
                TaskVersion.objects.filter(pk__in=version_ids[start : start + chunk_size]).select_related("task__environment")
            )
            refreshed += len(calibrations_refresh(task_versions=versions, probe_model=probe_model, population_prior=prior))
    return refreshed


def environment_thresholds_set(
    *, environment: Environment, floor: float, retire_at: float, by: AbstractBaseUser | None
) -> int:
    """Change an environment's floor and retirement threshold, then re-band its tasks.

    Validates 0 < floor < retire_at < 1 (CalibrationError otherwise). Bands are recomputed from
    the stored rollouts, with no new inference. Returns how many calibrations were recomputed.
    """
    try:
        floor, retire_at = float(floor), float(retire_at)
    except (TypeError, ValueError):
        raise CalibrationError(f"Thresholds must be numbers; got floor={floor!r}, retire_at={retire_at!r}.") from None
    try:
        stats.check_thresholds(floor=floor, retire_at=retire_at)
    except ValueError as error:
        raise CalibrationError(f"Thresholds need 0 < floor < retire_at < 1; {error}.") from None
    with transaction.atomic():
        previous = (environment.floor, environment.retire_at)
        Environment.objects.filter(pk=environment.pk).update(floor=floor, retire_at=retire_at)
        environment.floor, environment.retire_at = floor, retire_at
        refreshed = environment_calibrations_refresh(environment=environment)
    logger.info(
        "thresholds of %s changed from floor=%s retire_at=%s to floor=%s retire_at=%s by %s; %d calibrations re-banded",
        environment.name, *previous, floor, retire_at, getattr(by, "username", "system"), refreshed,
    )
    return refreshed


# ---------------------------------------------------------------------------------------------
# Drift: trainer feedback per policy checkpoint, automatic retirement
# ---------------------------------------------------------------------------------------------

FEEDBACK_RETIRE_REASON = "feedback: retired automatically"
FEEDBACK_REVIVE_REASON = "feedback: back in band"


@dataclass(frozen=True)
class Drift:
    """A task version's pass rate under the latest checkpoint that trainers reported."""

    checkpoints: int
    latest_checkpoint: str
    latest_step: int
    attempts: int
    passes: int
    pass_rate: float
    interval_low: float
    interval_high: float
    band: str
    decided: bool


@dataclass(frozen=True)
class FeedbackOutcome:
    report: FeedbackReport
    created: bool
    drift: Drift
    task_status: str
    status_changed: bool


def feedback_drift(*, task_version: TaskVersion) -> Drift | None:
    """Discounted assessment of a task version's trainer feedback (None without any).

    Reports are summed per checkpoint step; checkpoints are ranked 0, 1, 2, ... by step, so
    evidence k checkpoints older than the latest counts PASSBAND_FEEDBACK_DISCOUNT**k.
    """
    rows = list(
        FeedbackReport.objects.filter(task_version=task_version)
        .values("checkpoint_step")
        .annotate(attempts=Sum("attempts"), passes=Sum("passes"), name=Max("checkpoint"))
        .order_by("checkpoint_step")
    )
    if not rows:
        return None
    history = [(rank, row["attempts"], row["passes"]) for rank, row in enumerate(rows)]
    thresholds = thresholds_for(task_version.task.environment)
    assessment = stats.assess_discounted(
        history=history,
        thresholds=thresholds,
        # No cap: trainers decide how much to sample; only the confidence matters here.
        policy=stats.SamplingPolicy(kind="adaptive", cap=2**31 - 1, confidence=settings.PASSBAND_FEEDBACK_CONFIDENCE),
        discount=settings.PASSBAND_FEEDBACK_DISCOUNT,
    )
    latest = rows[-1]
    return Drift(
        checkpoints=len(rows),
        latest_checkpoint=latest["name"],
        latest_step=latest["checkpoint_step"],
        attempts=assessment.attempts,
        passes=assessment.successes,
        pass_rate=assessment.pass_rate,
        interval_low=assessment.interval_low,
        interval_high=assessment.interval_high,
        band=assessment.band,
        decided=assessment.decided,
    )


def feedback_record(
    *,
    task: Task,
    reported_by: AbstractBaseUser,
    checkpoint: str,
    checkpoint_step: int,
    attempts: int,
    passes: int,
    version_number: int | None = None,
    report_id: str = "",
) -> FeedbackOutcome:
    """Store a trainer's pass counts for one task under one policy checkpoint, and act on them.

    When the discounted pass rate under the latest checkpoint is decided in the retire band, an
    approved or active task is retired (audited through task_transition, reason
    FEEDBACK_RETIRE_REASON); a task that feedback retired and that later feedback puts back in
    band is made active again. A repeated `report_id` from the same user stores nothing twice.
    Raises CalibrationError for impossible counts or an unknown version.
    """
    from curation.errors import CurationError
    from curation.services import task_transition

    if attempts < 1 or not 0 <= passes <= attempts:
        raise CalibrationError(f"Need attempts >= 1 and 0 <= passes <= attempts; got {passes} of {attempts}.")
    if checkpoint_step < 0 or not checkpoint.strip():
        raise CalibrationError("A checkpoint needs a name and a step >= 0.")
    if version_number is None:
        version = task.current_version
    else:
        version = task.versions.filter(number=version_number).first()
    if version is None:
        raise CalibrationError(f"Task {task.key!r} has no version {version_number or '(current)'}.")
    with transaction.atomic():
        report, created = None, True
        if report_id:
            report = FeedbackReport.objects.filter(reported_by=reported_by, report_id=report_id).first()
            created = report is None
        if report is None:
            report = FeedbackReport.objects.create(
                task_version=version,
                reported_by=reported_by,
                checkpoint=checkpoint.strip(),
                checkpoint_step=checkpoint_step,
                attempts=attempts,
                passes=passes,
                report_id=report_id,
            )
        drift = feedback_drift(task_version=report.task_version)
        task.refresh_from_db(fields=["status", "current_version"])
        changed = False
        about_current = report.task_version_id == task.current_version_id
        summary = (
            f"pass rate {drift.pass_rate:.3f} [{drift.interval_low:.3f}, {drift.interval_high:.3f}] under "
            f"{drift.latest_checkpoint} (step {drift.latest_step}), reported by {reported_by.get_username()}"
        )
        decided = about_current and drift.decided
        try:
            if decided and drift.band == Band.RETIRE and task.status in (TaskStatus.APPROVED, TaskStatus.ACTIVE):
                reason = f"{FEEDBACK_RETIRE_REASON}: {summary}"
                task = task_transition(task=task, to_status=TaskStatus.RETIRED, by=None, reason=reason)
                changed = True
            elif decided and drift.band == Band.IN_BAND and task.status == TaskStatus.RETIRED:
                last = task.status_changes.filter(to_status=TaskStatus.RETIRED).order_by("-changed_at", "-id").first()
                if last is not None and last.reason.startswith(FEEDBACK_RETIRE_REASON):
                    reason = f"{FEEDBACK_REVIVE_REASON}: {summary}"
                    task = task_transition(task=task, to_status=TaskStatus.ACTIVE, by=None, reason=reason)
                    changed = True
        except CurationError:
            # A concurrent report moved it first; the evidence is stored either way.
            logger.info("feedback on %s: status already changed", task, exc_info=True)
            task.refresh_from_db(fields=["status"])
    return FeedbackOutcome(report=report, created=created, drift=drift, task_status=task.status, status_changed=changed)


def reprobe_sample(
    *, probability: float, cap: int, rng: random.Random | None = None, enqueue: bool = True
) -> list[Campaign]:
    """Re-probe a random share of too-hard and retired tasks, since some revive (run by beat).

    Per environment, each current version of a retired task, or of a task whose calibration
    under the environment's latest probe model is too_hard, is picked with `probability`; the
    picked ones get one adaptive campaign (cap `cap`) with that model, owned by whoever started
    the environment's latest campaign. Returns the campaigns started.
    """
    if not 0 <= probability <= 1:
        raise CalibrationError(f"The re-probe probability must lie in [0, 1]; got {probability}.")
    rng = rng or random.Random()
    started = []
    for environment in Environment.objects.all():
        latest = environment.campaigns.select_related("probe_model", "created_by").order_by("-created_at", "-pk").first()
        if latest is None or probability == 0:
            continue
        too_hard = Calibration.objects.filter(
            probe_model=latest.probe_model, band=Band.TOO_HARD, task_version__task__current_version=F("task_version")
        ).values("task_version")
        candidates = (
            TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
            .filter(Q(task__status=TaskStatus.RETIRED) | Q(pk__in=too_hard))
            .exclude(task__status=TaskStatus.REJECTED)
            .order_by("pk")
        )
        picked = [version for version in candidates if rng.random() < probability]
        if picked:
            started.append(
                campaign_start(
                    environment=environment,
                    probe_model=latest.probe_model,
                    created_by=latest.created_by,
                    policy=Campaign.Policy.ADAPTIVE,
                    rollouts=cap,
                    task_versions=picked,
                    enqueue=enqueue,
                )
            )
            logger.info("re-probing %d too-hard or retired task(s) of %s", len(picked), environment.name)
    return started


# ---------------------------------------------------------------------------------------------
# Model ladder: a cheap model's calibration as the prior for a strong model
# ---------------------------------------------------------------------------------------------


def _current_evidence(*, environment: Environment, probe_model: ProbeModel) -> dict[int, tuple[int, int]]:
    """(successes, attempts) per current task version of the environment under one model."""
    rows = Calibration.objects.filter(
        probe_model=probe_model,
        task_version__task__environment=environment,
        task_version__task__current_version=F("task_version"),
        attempts__gt=0,
    ).values_list("task_version_id", "successes", "attempts")
    return {version_id: (successes, attempts) for version_id, successes, attempts in rows}


def ladder_fit(*, environment: Environment, cheap_model: ProbeModel, strong_model: ProbeModel) -> stats.LogitShift | None:
    """The logit shift from the cheap to the strong model, fitted on tasks both have probed (or None)."""
    cheap = _current_evidence(environment=environment, probe_model=cheap_model)
    strong = _current_evidence(environment=environment, probe_model=strong_model)
    both = sorted(cheap.keys() & strong.keys())
    return stats.fit_logit_shift(cheap=[cheap[pk] for pk in both], strong=[strong[pk] for pk in both])


def campaign_start_ladder(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    cheap_model: ProbeModel,
    created_by: AbstractBaseUser,
    rollouts: int = 256,
    round_size: int = 8,
    confidence: float = 0.95,
    seed: int | None = None,
    task_versions: list[TaskVersion] | None = None,
    enqueue: bool = True,
) -> Campaign:
    """An adaptive campaign for a strong model whose per-task priors come from a cheap model.

    The ladder (stats.fit_logit_shift) is fitted on tasks both models probed already (at least
    10: probe a sample with the strong model first); each task the cheap model probed gets
    stats.ladder_prior, the others keep the environment's prior. By default it covers current
    versions the strong model has not probed. Raises CalibrationError when no ladder can be fitted.
    """
    if probe_model.pk == cheap_model.pk:
        raise CalibrationError("The cheap and the strong model must differ.")
    ladder = ladder_fit(environment=environment, cheap_model=cheap_model, strong_model=probe_model)
    if ladder is None:
        raise CalibrationError(
            f"Too few tasks probed by both {cheap_model.name} and {probe_model.name} to fit a ladder (need 10); "
            f"probe a sample with {probe_model.name} first (calibrate --limit 20)."
        )
    cheap = _current_evidence(environment=environment, probe_model=cheap_model)
    if task_versions is None:
        probed = _current_evidence(environment=environment, probe_model=probe_model)
        task_versions = list(
            TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
            .exclude(task__status=TaskStatus.REJECTED)
            .exclude(pk__in=list(probed))
            .order_by("pk")
        )
    with transaction.atomic():
        campaign = campaign_start(
            environment=environment,
            probe_model=probe_model,
            created_by=created_by,
            policy=Campaign.Policy.ADAPTIVE,
            rollouts=rollouts,
            round_size=round_size,
            confidence=confidence,
            seed=seed,
            task_versions=task_versions,
            enqueue=False,
        )
        items = list(CampaignItem.objects.filter(campaign=campaign, task_version_id__in=list(cheap)))
        for item in items:
            successes, attempts = cheap[item.task_version_id]
            prior = stats.ladder_prior(successes=successes, attempts=attempts, ladder=ladder)
            item.prior = [prior.alpha, prior.beta]
        CampaignItem.objects.bulk_update(items, ["prior"])
        if enqueue:
            transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign.pk))
    logger.info(
        "ladder campaign %s: %s from %s, shift %.2f (spread %.2f, %d tasks), %d priors",
        campaign.pk, probe_model.name, cheap_model.name, ladder.shift, ladder.spread, ladder.tasks, len(items),
    )
    return campaign
