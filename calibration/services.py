"""Writes for calibration: probe models, campaigns, rollouts and calibrations.

A campaign probes task versions in rounds. For each (campaign, task version) a round is:
generate the missing samples (queue `generate`), verify the unverified ones (queue `verify`),
refresh the calibration from the stored rows, then either schedule the next round or mark the
item done. Every step reads what is stored and writes only what is missing, so running any step
twice, or after a worker was killed, records each planned rollout exactly once.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from decimal import Decimal
from typing import Callable

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from calibration import backends, stats, verifiers
from calibration.errors import CalibrationError
from calibration.models import Band, Calibration, Campaign, CampaignItem, Outcome, ProbeModel, Rollout
from calibration.packing import pack_logprobs, pack_tokens
from curation.models import Environment, Task, TaskStatus, TaskVersion

logger = logging.getLogger(__name__)

# A task whose verifier errors on more than this share of verdicts is verifier trouble, not hard.
VERIFIER_TROUBLE_SHARE = 0.2
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
) -> ProbeModel:
    """Register a probe model. Raises CalibrationError for an unknown backend or a missing URL."""
    if backend not in ProbeModel.Backend.values:
        raise CalibrationError(f"Unknown backend {backend!r}; use one of {', '.join(ProbeModel.Backend.values)}.")
    if backend == ProbeModel.Backend.OPENAI and not (base_url and model):
        raise CalibrationError("The openai backend needs --base-url and --model.")
    if ProbeModel.objects.filter(name=name).exists():
        raise CalibrationError(f"A probe model named {name!r} already exists.")
    if not 0 <= temperature <= 5 or not 0 < top_p <= 1 or max_new_tokens < 1:
        raise CalibrationError("Need 0 <= temperature <= 5, 0 < top_p <= 1 and max_new_tokens >= 1.")
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


def campaign_enqueue_pending(*, campaign_id: int, stalled_for_seconds: int = 0) -> int:
    """Queue the current round of every unfinished item (all of them, or those idle for a while).

    Safe to call at any time: a round that is already generated or verified is skipped by the
    workers. Returns how many items were queued.
    """
    from calibration.tasks import generate_rollouts

    items = CampaignItem.objects.filter(campaign_id=campaign_id, done=False)
    if stalled_for_seconds:
        items = items.filter(updated_at__lt=timezone.now() - timedelta(seconds=stalled_for_seconds))
    pending = list(items.values_list("task_version_id", "round"))
    for version_id, round_index in pending:
        generate_rollouts.delay(campaign_id, version_id, round_index)
    return len(pending)


def campaigns_reconcile(*, stalled_for_seconds: int = 300) -> int:
    """Re-queue rounds of running campaigns that made no progress for a while (run by beat)."""
    return sum(
        campaign_enqueue_pending(campaign_id=campaign_id, stalled_for_seconds=stalled_for_seconds)
        for campaign_id in Campaign.objects.filter(status=Campaign.Status.RUNNING).values_list("pk", flat=True)
    )


def round_indices(campaign: Campaign, round_index: int) -> range:
    """Sample indices of one round: [round * round_size, min(next round, max_rollouts))."""
    start = round_index * campaign.round_size
    return range(start, min(start + campaign.round_size, campaign.max_rollouts))


def _rollout_cost(probe_model: ProbeModel, *, generation_ms: float | None, input_tokens, output_tokens) -> Decimal:
    cost = Decimal(0)
    if probe_model.usd_per_gpu_hour and generation_ms:
        hours = Decimal(str(generation_ms)) / Decimal(3_600_000)
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
    )


def sampling_params(probe_model: ProbeModel) -> backends.SamplingParams:
    return backends.SamplingParams(
        temperature=probe_model.temperature,
        top_p=probe_model.top_p,
        max_new_tokens=probe_model.max_new_tokens,
        stop=tuple(probe_model.stop),
    )


def rollouts_generate(*, campaign_id: int, task_version_id: int, round_index: int) -> int:
    """Generate one round's missing samples for one task version. Returns how many were stored."""
    campaign = Campaign.objects.select_related("probe_model").get(pk=campaign_id)
    if campaign.status != Campaign.Status.RUNNING:
        return 0
    if not CampaignItem.objects.filter(
        campaign=campaign, task_version_id=task_version_id, done=False, round=round_index
    ).exists():
        return 0
    version = TaskVersion.objects.get(pk=task_version_id)
    existing = set(
        Rollout.objects.filter(
            campaign=campaign, task_version=version, sample_index__in=round_indices(campaign, round_index)
        ).values_list("sample_index", flat=True)
    )
    indices = [index for index in round_indices(campaign, round_index) if index not in existing]
    if not indices:
        return 0
    probe_model = campaign.probe_model
    params = sampling_params(probe_model)
    seeds = [
        backends.rollout_seed(campaign_seed=campaign.seed, task_version_hash=version.content_hash, sample_index=index)
        for index in indices
    ]
    generations = backend_for_probe_model(probe_model).generate(messages=version.prompt, seeds=seeds, params=params)
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
    for index, seed, generation in zip(indices, seeds, generations, strict=True):
        failed = generation.error is not None
        rows.append(
            Rollout(
                campaign=campaign,
                task_version=version,
                probe_model=probe_model,
                sample_index=index,
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
                cost_usd=_rollout_cost(
                    probe_model,
                    generation_ms=generation.latency_ms,
                    input_tokens=generation.input_tokens,
                    output_tokens=generation.output_tokens,
                ),
            )
        )
    # The unique (campaign, task version, sample index) makes a retried job a no-op.
    created = Rollout.objects.bulk_create(rows, ignore_conflicts=True)
    return len(created)


def rollouts_verify(*, campaign_id: int, task_version_id: int) -> int:
    """Score every unverified rollout of one task version in a campaign. Returns how many were scored."""
    version = TaskVersion.objects.get(pk=task_version_id)
    pending = list(
        Rollout.objects.filter(campaign_id=campaign_id, task_version_id=task_version_id, outcome__isnull=True)
        .only("id", "text")
        .order_by("sample_index")
    )
    now = timezone.now()
    for rollout in pending:
        verdict = verifiers.verify(
            verifier=version.verifier, completion=rollout.text, answer=version.answer, prompt=version.prompt
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


def calibration_refresh(
    *, task_version: TaskVersion, probe_model: ProbeModel, policy: dict | None = None
) -> Calibration:
    """Recompute one calibration from every stored rollout of this model on this version.

    `policy` is the campaign's sampling policy; None keeps the one stored on the calibration
    (e.g. when an environment's thresholds change and bands are recomputed without inference).
    """
    counts = Rollout.objects.filter(task_version=task_version, probe_model=probe_model).aggregate(
        successes=Count("id", filter=Q(outcome=Outcome.PASS)),
        failures=Count("id", filter=Q(outcome=Outcome.FAIL)),
        verifier_errors=Count("id", filter=Q(outcome__in=[Outcome.ERROR, Outcome.TIMEOUT])),
        generation_errors=Count("id", filter=Q(outcome=Outcome.GENERATION_ERROR)),
        cost=Sum("cost_usd"),
    )
    attempts = counts["successes"] + counts["failures"]
    environment = task_version.task.environment
    if policy is None:
        stored = Calibration.objects.filter(task_version=task_version, probe_model=probe_model).first()
        policy = stored.policy if stored else {}
    assessment = stats.assess(
        successes=counts["successes"],
        attempts=attempts,
        thresholds=thresholds_for(environment),
        policy=_sampling_policy(policy, attempts=attempts),
    )
    flags = []
    verdicts = attempts + counts["verifier_errors"]
    if verdicts and counts["verifier_errors"] / verdicts > VERIFIER_TROUBLE_SHARE:
        flags.append("verifier_trouble")
    if attempts and counts["successes"] in (0, attempts):
        flags.append("zero_variance")
    band = assessment.band
    if "verifier_trouble" in flags and band == Band.TOO_HARD:
        # Failing verdicts from a broken verifier are not evidence that the task is hard.
        band = Band.UNDECIDED
    calibration, _ = Calibration.objects.update_or_create(
        task_version=task_version,
        probe_model=probe_model,
        defaults={
            "attempts": attempts,
            "successes": counts["successes"],
            "verifier_errors": counts["verifier_errors"],
            "generation_errors": counts["generation_errors"],
            "pass_rate": assessment.observed_rate,
            "interval_low": assessment.interval_low if attempts else None,
            "interval_high": assessment.interval_high if attempts else None,
            "band": band,
            "decided": assessment.decided,
            "grpo_signal": assessment.grpo_signal if attempts else None,
            "cost_usd": counts["cost"] or Decimal(0),
            "flags": flags,
            "policy": policy,
        },
    )
    return calibration


def campaign_item_advance(*, campaign_id: int, task_version_id: int, round_index: int) -> bool:
    """After a round is verified: refresh the calibration, then finish the item or open the next round.

    Returns True when this call opened the next round (the caller queues it). The round moves
    forward by compare-and-swap, so a retried or duplicated job cannot open it twice.
    """
    campaign = Campaign.objects.select_related("probe_model", "environment").get(pk=campaign_id)
    version = TaskVersion.objects.select_related("task__environment").get(pk=task_version_id)
    calibration = calibration_refresh(
        task_version=version, probe_model=campaign.probe_model, policy=policy_for(campaign)
    )
    planned = round_indices(campaign, round_index)
    in_round = Rollout.objects.filter(
        campaign=campaign, task_version=version, sample_index__gte=planned.start, sample_index__lt=planned.stop
    ).aggregate(stored=Count("id"), unverified=Count("id", filter=Q(outcome__isnull=True)))
    if in_round["stored"] < len(planned) or in_round["unverified"]:
        return False  # the round is not complete yet; its own jobs will come back here
    finished = planned.stop >= campaign.max_rollouts or (
        campaign.policy == Campaign.Policy.ADAPTIVE and calibration.band != Band.UNDECIDED
    )
    items = CampaignItem.objects.filter(campaign=campaign, task_version=version, round=round_index, done=False)
    if not finished:
        return campaign.status == Campaign.Status.RUNNING and items.update(round=round_index + 1) == 1
    with transaction.atomic():
        items.update(done=True)
        if not CampaignItem.objects.filter(campaign=campaign, done=False).exists():
            Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.RUNNING).update(
                status=Campaign.Status.DONE, finished_at=timezone.now()
            )
    return False


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
            rollouts_generate(campaign_id=campaign.pk, task_version_id=version_id, round_index=round_index)
            rollouts_verify(campaign_id=campaign.pk, task_version_id=version_id)
            if not campaign_item_advance(campaign_id=campaign.pk, task_version_id=version_id, round_index=round_index):
                break
            round_index += 1
        if progress:
            progress(position, len(items))
    campaign.refresh_from_db()
    return campaign
