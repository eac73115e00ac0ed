"""The round pipeline, written once: generate, verify, refresh the calibrations, advance.

Celery runs its two halves on two queues (round_generate on `generate`, round_score on `verify`);
the inline runner and the benchmarks call round_run, which is both in a row."""

from __future__ import annotations

import time
from typing import Callable

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from calibration import costs, metrics
from calibration.errors import ServerUnavailable
from calibration.models import (
    Band,
    Campaign,
    CampaignItem,
    ProbeModel,
    Rollout,
)
from calibration.services.calibrations import calibrations_refresh
from calibration.services.campaigns import (
    campaign_accepts_rollouts,
    campaign_enqueue_pending,
    campaign_finish_if_done,
    campaign_is_running,
    round_enqueue,
)
from calibration.services.episodes import episodes_generate, is_tool_task
from calibration.services.policies import policy_for
from calibration.services.probe_models import (
    backend_for_probe_model,
    sampling_params,
)
from calibration.services.rollout_store import rollout_row, rollouts_insert, verdicts_save
from curation.models import TaskVersion
from engine import backends, stats, verifiers
from engine.verifiers.kinds import episode_reward

# On an episode whose environment reward and Passband check disagree (episode_reward tasks).
REWARD_DISAGREEMENT_FLAG = "reward_disagreement"


def round_indices(campaign: Campaign, round_index: int) -> range:
    """Sample indices of one round: [round * round_size, min(next round, max_rollouts))."""
    start = round_index * campaign.round_size
    return range(start, min(start + campaign.round_size, campaign.max_rollouts))


def _version_ids(task_version_ids: int | list[int]) -> list[int]:
    # Jobs queued before batching carry one id.
    return [task_version_ids] if isinstance(task_version_ids, int) else list(task_version_ids)


def _samples_missing(
    *, campaign: Campaign, version_ids: set[int], planned: range
) -> list[tuple[TaskVersion, list[int]]]:
    """Per version (in id order), the sample indices of the round that no stored rollout has yet."""
    existing: dict[int, set[int]] = {}
    for version_id, index in Rollout.objects.filter(
        campaign=campaign,
        task_version_id__in=version_ids,
        sample_index__gte=planned.start,
        sample_index__lt=planned.stop,
    ).values_list("task_version_id", "sample_index"):
        existing.setdefault(version_id, set()).add(index)
    work = []
    for version in (
        TaskVersion.objects.filter(pk__in=version_ids).select_related("task__environment__mcp_server").order_by("pk")
    ):
        indices = [index for index in planned if index not in existing.get(version.pk, ())]
        if indices:
            work.append((version, indices))
    return work


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
    work = _samples_missing(campaign=campaign, version_ids=open_ids, planned=planned)
    if not work:
        return 0
    probe_model = campaign.probe_model
    _model_load(campaign=campaign, probe_model=probe_model)
    params = sampling_params(probe_model, max_new_tokens=campaign.max_new_tokens)
    sampling = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_new_tokens": params.max_new_tokens,
        "stop": list(params.stop),
        "backend": probe_model.backend,
        "model": probe_model.model or probe_model.name,
        "revision": probe_model.revision,
    }
    rows: list[dict] = []
    infrastructure_errors: list[str] = []
    for version, indices, seeds, device_times, generations, episodes in _generate_all(
        campaign=campaign, probe_model=probe_model, params=params, work=work
    ):
        # The samples of a round share the device (one batch, or concurrent requests): each rollout is
        # charged its share of the round's wall time by the tokens it generated, so a batch is paid once.
        for index, seed, generation, episode, device_ms in zip(
            indices, seeds, generations, episodes, device_times, strict=True
        ):
            if generation.error is not None and generation.error_kind not in ("prompt_too_long", "world"):
                # The server's fault, not an attempt: not stored, so the round asks for it again later.
                infrastructure_errors.append(generation.error)
                continue
            rows.append(
                rollout_row(
                    campaign=campaign,
                    version=version,
                    sample_index=index,
                    seed=seed,
                    generation=generation,
                    episode=episode,
                    sampling=sampling,
                    device_ms=device_ms,
                )
            )
    with transaction.atomic():
        # Cancelled while this job sampled: what it made is dropped, never stored unscored.
        stored = rollouts_insert(rows) if campaign_accepts_rollouts(campaign_id=campaign.pk) else 0
    metrics.rollouts_generated(model=probe_model.name, count=stored)
    _server_state_record(campaign=campaign, errors=infrastructure_errors)
    if infrastructure_errors:
        raise ServerUnavailable(
            f"{len(infrastructure_errors)} samples wait for the model server: {infrastructure_errors[-1]}",
            stored=stored,
            withheld=len(infrastructure_errors),
        )
    return stored


def _model_load(*, campaign: Campaign, probe_model: ProbeModel) -> None:
    """Load an in-process model before any sample is timed, as a state of its own on the campaign.

    A model in this process (transformers) is read, converted and moved to its device on first use: that
    can take minutes. The first job of a campaign marks `model_loading_since`, loads, and records
    `model_load_seconds` (about 0 when this worker had it loaded already). Samples are timed after it,
    so loading is never billed to the first task's rollouts. A server's model (openai) is the server's."""
    if probe_model.backend != ProbeModel.Backend.TRANSFORMERS:
        return
    Campaign.objects.filter(pk=campaign.pk, model_loading_since__isnull=True).update(model_loading_since=timezone.now())
    started = time.perf_counter()
    backend_for_probe_model(probe_model)
    Campaign.objects.filter(pk=campaign.pk, model_load_seconds__isnull=True).update(
        model_load_seconds=time.perf_counter() - started
    )


def _server_state_record(*, campaign: Campaign, errors: list[str]) -> None:
    """Mark the campaign as waiting for its model server (since when, the last error), or clear the mark."""
    if errors:
        Campaign.objects.filter(pk=campaign.pk, server_waiting_since__isnull=True).update(
            server_waiting_since=timezone.now()
        )
        Campaign.objects.filter(pk=campaign.pk).update(server_error=errors[-1][:2000])
    elif campaign.server_waiting_since is not None or campaign.server_error:
        Campaign.objects.filter(pk=campaign.pk).update(server_waiting_since=None, server_error="")


def _generate_all(
    *,
    campaign: Campaign,
    probe_model: ProbeModel,
    params: backends.SamplingParams,
    work: list[tuple[TaskVersion, list[int]]],
):
    """Sample every (version, indices) of `work`; yields (version, indices, seeds, device ms per sample,
    generations, episodes).

    Plain prompts go to the backend together (a server sees the whole batch at once), and each
    sample is charged the batch's wall time in proportion to the tokens it generated
    (costs.device_time_shares); tool-use episodes run one version after another.
    """
    seeds_of = {
        version.pk: [
            backends.rollout_seed(
                campaign_seed=campaign.seed, task_version_hash=version.content_hash, sample_index=index
            )
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
        elapsed = time.perf_counter() - started
        shares = iter(
            costs.device_time_shares(
                seconds=elapsed,
                output_tokens=[generation.output_tokens for generations in results for generation in generations],
            )
        )
        for (version, indices), generations in zip(plain, results, strict=True):
            device_ms = [next(shares) for _ in generations]
            yield version, indices, seeds_of[version.pk], device_ms, generations, [None] * len(generations)
    for version, indices in episodic:
        started = time.perf_counter()
        generations, episodes = episodes_generate(
            version=version, probe_model=probe_model, seeds=seeds_of[version.pk], params=params
        )
        device_ms = costs.device_time_shares(
            seconds=time.perf_counter() - started,
            output_tokens=[generation.output_tokens for generation in generations],
        )
        yield version, indices, seeds_of[version.pk], device_ms, generations, episodes


def rollouts_verify(*, campaign_id: int, task_version_ids: int | list[int]) -> int:
    """Score every unverified rollout of some task versions in a campaign. Returns how many were scored."""
    ids = _version_ids(task_version_ids)
    versions = {
        version.pk: version
        for version in TaskVersion.objects.filter(pk__in=ids).only("verifier", "answer", "prompt", "tools")
    }
    pending = (
        Rollout.objects.filter(campaign_id=campaign_id, task_version_id__in=ids, outcome__isnull=True)
        .order_by("task_version_id", "sample_index")
        .values_list("id", "task_version_id", "text", "episode")
    )
    verdicts, kinds = [], []
    disagreeing: list[tuple[int, dict]] = []
    for rollout_id, version_id, text, episode in pending:
        version = versions[version_id]
        # A tool task's rollout is judged by its episode (the final state), not by its words.
        completion = episode if episode is not None else text
        verdict = verifiers.verify(
            verifier=version.verifier,
            completion=completion,
            answer=version.answer,
            prompt=version.prompt,
            tools=version.tools,
        )
        verdicts.append((rollout_id, verdict.outcome, verdict.reward, verdict.detail[:2000], verdict.latency_ms))
        kinds.append((version.verifier or {}).get("kind", ""))
        if kinds[-1] == episode_reward.KIND and episode is not None and episode_reward.disagrees(verdict.detail):
            disagreeing.append((rollout_id, episode))
    verdicts_save(verdicts, verified_at=timezone.now())
    _disagreements_flag(disagreeing)
    metrics.rollouts_verified(verdicts=[(kind, outcome, ms) for kind, (_, outcome, _, _, ms) in zip(kinds, verdicts)])
    return len(verdicts)


def _disagreements_flag(disagreeing: list[tuple[int, dict]]) -> None:
    """Flag rollouts whose environment reward and Passband check disagree (episode["flags"])."""
    for rollout_id, episode in disagreeing:
        flags = sorted(set(episode.get("flags") or []) | {REWARD_DISAGREEMENT_FLAG})
        Rollout.objects.filter(pk=rollout_id).update(episode={**episode, "flags": flags})
        metrics.reward_disagreement()


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
            policies[version.pk]["prior"] = item_priors[
                version.pk
            ]  # stored on the calibration, so a threshold change keeps it
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
    finished: list[int] = []
    unfinished: list[int] = []
    for version in versions:
        row = rounds.get(version.pk)
        if row is None or row["stored"] < len(planned) or row["unverified"]:
            continue  # the round is not complete yet; its own jobs will come back here
        done = (
            planned.stop >= campaign.max_rollouts
            or (campaign.policy == Campaign.Policy.ADAPTIVE and calibrations[version.pk].band != Band.UNDECIDED)
            # More samples of a prompt that does not fit, or of a world that keeps failing, would fail the same
            # way: the author must fix it.
            or stats.Flag.PROMPT_TOO_LONG in calibrations[version.pk].flags
            or stats.Flag.WORLD_FAILURE in calibrations[version.pk].flags
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


def round_generate(*, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> int | None:
    """First half of a round (queue `generate`): sample and store its rollouts. Returns rollouts
    stored, or None when the campaign is not running (the job is dropped after one lookup)."""
    if not campaign_is_running(campaign_id=campaign_id):
        return None
    return rollouts_generate(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index)


def round_score(*, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> list[int] | None:
    """Second half of a round (queue `verify`): score its rollouts, refresh the calibrations, and
    finish each item or open its next round. Returns the versions whose next round opened, or None
    when the campaign is not running: a cancelled campaign leaves unprobed tasks as they were."""
    if not campaign_is_running(campaign_id=campaign_id):
        return None
    rollouts_verify(campaign_id=campaign_id, task_version_ids=task_version_ids)
    return campaign_items_advance(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index)


def round_score_and_continue(*, campaign_id: int, task_version_ids: int | list[int], round_index: int) -> int:
    """round_score, then queue the rounds it opened and refill the campaign's window of jobs with
    items not yet started (the Celery path). Returns how many versions had their next round opened."""
    opened = round_score(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index)
    if opened is None:
        return 0
    if opened:
        transaction.on_commit(
            lambda: round_enqueue(campaign_id=campaign_id, task_version_ids=opened, round_index=round_index + 1)
        )
    transaction.on_commit(lambda: campaign_enqueue_pending(campaign_id=campaign_id))
    return len(opened)


def round_run(
    *, campaign_id: int, task_version_ids: int | list[int], round_index: int, server_wait_s: float = 0.0
) -> list[int]:
    """One whole round in this process: round_generate, then round_score. Samples the model server
    failed to give are asked for again, with a growing pause, for up to `server_wait_s` seconds; after
    that the round stays open (ServerUnavailable propagates) for a later run to finish."""
    deadline = time.monotonic() + server_wait_s
    pause_s = 1.0
    while True:
        try:
            round_generate(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index)
            break
        except ServerUnavailable:
            if time.monotonic() + pause_s > deadline:
                raise
            time.sleep(pause_s)
            pause_s = min(2 * pause_s, 30.0)
    return round_score(campaign_id=campaign_id, task_version_ids=task_version_ids, round_index=round_index) or []


def campaign_run_inline(*, campaign: Campaign, progress: Callable[[int, int], None] | None = None) -> Campaign:
    """Run a whole campaign in this process, without a broker: the same rounds the workers run."""
    items = list(CampaignItem.objects.filter(campaign=campaign, done=False).values_list("task_version_id", "round"))
    wait_s = float(getattr(settings, "PASSBAND_INLINE_SERVER_WAIT_S", 300))
    for position, (version_id, round_index) in enumerate(items, start=1):
        while round_run(
            campaign_id=campaign.pk, task_version_ids=[version_id], round_index=round_index, server_wait_s=wait_s
        ):
            round_index += 1
        if progress:
            progress(position, len(items))
    campaign.refresh_from_db()
    return campaign
