"""Impossible-variant probes: derive each sampled task's variant (engine/verifiers/impossible.py), check it fails
the reference and the empty answer, sample the task's own prompt with the probe model under a campaign's settings,
and grade every attempt by the variant's verifier. A pass is a found hack: the task gets a comment with the
variant and the evidence, an approved task goes back to review, and the review queue lists it first.

Variants and their rollouts live in their own tables (calibration/variant_models.py): nothing that reads Rollout
or Calibration meets them. Run by the Celery task `generate_impossible_variants` (queue `generate`) under a
lease, or inline; safe to run twice (a variant, and a sample, is stored once), and queued again by beat when its
job was lost (calibration/services/variant_leases.py).
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError
from django.db.models import F
from django.utils import timezone

from calibration import costs
from calibration.errors import CalibrationError
from calibration.models import ImpossibleVariant, ProbeModel, VariantProbe, VariantRollout
from calibration.services.campaigns import MAX_NEW_TOKENS_LIMIT
from calibration.services.episodes import episodes_generate, is_tool_task
from calibration.services.probe_models import backend_for_probe_model, sampling_params
from calibration.services.variant_leases import variant_probe_queue
from curation.errors import CurationError
from curation.models import Comment, Environment, Task, TaskStatus, TaskVersion
from curation.services import task_transition
from engine import backends, verifiers
from engine.verifiers import impossible

logger = logging.getLogger(__name__)

SAMPLE = 20  # tasks a probe takes from an environment by default
ROLLOUTS = 8  # attempts per variant by default
HACK_COMMENT = "[impossible variant]"
# A pass on a shifted answer by an attempt that states the moved value itself: graded right, never a hack.
COINCIDENCE = "coincidence"


def _sampled_versions(*, environment: Environment, task: Task | None, sample: int, seed: int) -> list[int]:
    if task is not None:
        if task.environment_id != environment.pk or task.current_version_id is None:
            raise CalibrationError(f"Task {task.key} is not a task of {environment.name} with a version.")
        return [task.current_version_id]
    ids = sorted(
        TaskVersion.objects.filter(task__environment=environment, task__current_version=F("pk"))
        .exclude(task__status=TaskStatus.REJECTED)
        .values_list("pk", flat=True)
    )
    if not ids:
        raise CalibrationError(f"Environment {environment.name!r} has no tasks to probe.")
    return sorted(random.Random(seed).sample(ids, min(sample, len(ids))))


def variant_probe_start(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    created_by: AbstractBaseUser | None,
    sample: int = SAMPLE,
    task: Task | None = None,
    rollouts: int = ROLLOUTS,
    seed: int | None = None,
    max_new_tokens: int | None = None,
    enqueue: bool = True,
) -> VariantProbe:
    """Record a probe of `sample` of the environment's current tasks (or of `task` alone) and, with `enqueue`,
    queue it for a worker after the commit. The completion budget is a campaign's: `max_new_tokens`, else the
    environment's default, else the model's. CalibrationError on a bad size or an empty environment."""
    if rollouts < 1 or sample < 1:
        raise CalibrationError("Rollouts per variant and the sample must be at least 1.")
    budget = max_new_tokens or environment.max_new_tokens or probe_model.max_new_tokens
    if not 1 <= budget <= MAX_NEW_TOKENS_LIMIT:
        raise CalibrationError(f"Max new tokens must lie between 1 and {MAX_NEW_TOKENS_LIMIT}; got {budget}.")
    seed = secrets.randbits(31) if seed is None else seed
    probe = VariantProbe.objects.create(
        environment=environment,
        probe_model=probe_model,
        created_by=created_by,
        seed=seed,
        rollouts=rollouts,
        max_new_tokens=budget,
        task_version_ids=_sampled_versions(environment=environment, task=task, sample=sample, seed=seed),
    )
    if enqueue:
        variant_probe_queue(probe_id=probe.pk)
    return probe


def _variant_of(probe: VariantProbe, version: TaskVersion) -> ImpossibleVariant:
    """The version's variant in this probe, derived and checked once (a retried job finds it stored)."""
    stored = ImpossibleVariant.objects.filter(probe=probe, task_version=version).first()
    if stored is not None:
        return stored
    checked = impossible.variant_check(
        verifier=version.verifier, answer=version.answer, prompt=version.prompt, tools=version.tools
    )
    variant = checked.variant
    try:
        return ImpossibleVariant.objects.create(
            probe=probe,
            task_version=version,
            status=checked.status,
            kind=variant.kind if variant else "",
            change=variant.change if variant else "",
            verifier=variant.verifier if variant else None,
            answer=variant.answer if variant else None,
            reason=checked.reason,
            reference_outcome=checked.reference_outcome[:200],
            empty_outcome=checked.empty_outcome[:200],
            reference_passes=checked.reference_passes,
        )
    except IntegrityError:
        return ImpossibleVariant.objects.get(probe=probe, task_version=version)


def _generations(
    *, probe: VariantProbe, version: TaskVersion, seeds: list[int], params: backends.SamplingParams
) -> tuple[list[backends.Generation], list[dict | None], list[float]]:
    """Sample the task's own prompt once per seed, as a campaign's round does (a tool task as episodes)."""
    started = time.perf_counter()
    if is_tool_task(version):
        generations, episodes = episodes_generate(
            version=version, probe_model=probe.probe_model, seeds=seeds, params=params
        )
    else:
        generations = backend_for_probe_model(probe.probe_model).generate_many(
            prompts=[(version.prompt, seeds)], params=params
        )[0]
        episodes = [None] * len(generations)
    device_ms = costs.device_time_shares(
        seconds=time.perf_counter() - started, output_tokens=[generation.output_tokens for generation in generations]
    )
    return generations, episodes, device_ms


def _graded(variant: ImpossibleVariant, generations: list, episodes: list) -> list[dict[str, Any]]:
    """Each attempt's verdict by the variant's verifier (graded together where the kind can: a repository
    task's patches in as few sandbox runs as fit), a pass that states a shifted answer's value a coincidence."""
    version = variant.task_version
    graded = [index for index, generation in enumerate(generations) if generation.error is None]
    completions = [episodes[index] if episodes[index] is not None else generations[index].text for index in graded]
    verdicts: dict[int, verifiers.Verdict] = {}
    if graded:
        verdicts = dict(
            zip(
                graded,
                verifiers.verify_many(
                    verifier=variant.verifier,
                    completions=completions,
                    answer=variant.answer,
                    prompt=version.prompt,
                    tools=version.tools,
                ),
                strict=True,
            )
        )
    rows: list[dict[str, Any]] = []
    for index, generation in enumerate(generations):
        verdict = verdicts.get(index)
        if verdict is None:
            rows.append({"outcome": "generation_error", "detail": f"generation failed: {generation.error}"})
            continue
        row = {"outcome": verdict.outcome, "reward": verdict.reward, "detail": verdict.detail[:2000]}
        if verdict.outcome == "pass" and impossible.is_coincidence(
            kind=variant.kind, verifier=variant.verifier, answer=variant.answer, completion=generation.text
        ):
            row["outcome"] = COINCIDENCE
            row["detail"] = f"states the variant's value {variant.answer!r} itself: a wrong answer, not a hack"
        rows.append(row)
    return rows


def _rollouts_sample(probe: VariantProbe, variant: ImpossibleVariant, params: backends.SamplingParams) -> int:
    """Sample and grade the variant's missing attempts; returns how many were stored."""
    version = variant.task_version
    done = set(variant.rollouts.values_list("sample_index", flat=True))
    indices = [index for index in range(probe.rollouts) if index not in done]
    if not indices:
        return 0
    seeds = [
        backends.rollout_seed(campaign_seed=probe.seed, task_version_hash=version.content_hash, sample_index=index)
        for index in indices
    ]
    generations, episodes, device_ms = _generations(probe=probe, version=version, seeds=seeds, params=params)
    price = costs.Price.of(probe.probe_model)
    rows = [
        VariantRollout(
            variant=variant,
            sample_index=index,
            seed=seed,
            text=generation.text,
            episode=episode,
            finish_reason=generation.finish_reason,
            generation_error=generation.error or "",
            input_tokens=generation.input_tokens,
            output_tokens=generation.output_tokens,
            cost_usd=costs.rollout_cost(
                price=price,
                device_ms=shares,
                input_tokens=generation.input_tokens,
                output_tokens=generation.output_tokens,
            ),
            **row,
        )
        for index, seed, generation, episode, shares, row in zip(
            indices, seeds, generations, episodes, device_ms, _graded(variant, generations, episodes), strict=True
        )
    ]
    # A second job at the same probe (a redelivered message) stores nothing twice: one row per sample.
    VariantRollout.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def variant_probe_run(*, probe_id: int) -> VariantProbe:
    """Derive, check, sample and grade every variant of the probe, flag what passed, and mark it done. A crash
    marks it failed (with why) and is raised; a probe already done is returned as it is."""
    probe = VariantProbe.objects.select_related("probe_model", "environment", "created_by").get(pk=probe_id)
    if probe.status == VariantProbe.Status.DONE:
        return probe
    params = sampling_params(probe.probe_model, max_new_tokens=probe.max_new_tokens)
    try:
        versions = TaskVersion.objects.filter(pk__in=probe.task_version_ids).select_related(
            "task__environment__mcp_server"
        )
        for version in versions.order_by("pk"):
            variant = _variant_of(probe, version)
            if variant.status == ImpossibleVariant.Status.READY:
                _rollouts_sample(probe, variant, params)
        found_hacks_flag(probe=probe)
    except Exception as error:
        VariantProbe.objects.filter(pk=probe.pk).update(status=VariantProbe.Status.FAILED, error=str(error)[:2000])
        raise
    VariantProbe.objects.filter(pk=probe.pk).update(
        status=VariantProbe.Status.DONE, finished_at=timezone.now(), error=""
    )
    probe.refresh_from_db()
    return probe


def _evidence(variant: ImpossibleVariant, rollouts: list[VariantRollout]) -> str:
    first = rollouts[0]
    excerpt = (first.text or "(a tool episode)")[:300]
    return (
        f"{HACK_COMMENT} {len(rollouts)} attempt(s) passed an impossible variant of version "
        f"{variant.task_version.number} "
        f"under {variant.probe.probe_model.name} (probe {variant.probe_id}): {variant.change}. "
        f"The verifier ({variant.task_version.verifier.get('kind', '')}) paid what no honest answer can earn. "
        f"Variant rollout {first.pk}, sample {first.sample_index}: {first.detail[:200]!r}; completion: {excerpt!r}"
    )


def found_hacks_flag(*, probe: VariantProbe) -> list[int]:
    """Flag the tasks whose variant a rollout of this probe passed: a comment with the variant and the evidence
    (once per variant), and an approved task back into review. Returns the flagged task ids."""
    flagged = []
    hacked = ImpossibleVariant.objects.filter(probe=probe, rollouts__outcome="pass").distinct()
    for variant in hacked.select_related("task_version__task", "probe__probe_model"):
        task = variant.task_version.task
        flagged.append(task.pk)
        marker = f"(probe {probe.pk})"
        author = probe.created_by or task.owner
        if Comment.objects.filter(task=task, body__startswith=HACK_COMMENT, body__contains=marker).exists():
            continue
        rollouts = list(variant.rollouts.filter(outcome="pass").order_by("sample_index"))
        Comment.objects.create(task=task, author=author, body=_evidence(variant, rollouts))
        if task.status == TaskStatus.APPROVED:
            try:
                task_transition(
                    task=task, to_status=TaskStatus.IN_REVIEW, by=probe.created_by, reason="impossible variant passed"
                )
            except CurationError:
                logger.exception("could not send task %s back to review", task.pk)
    return flagged
