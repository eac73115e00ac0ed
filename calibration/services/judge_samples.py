"""Judged rollouts sampled for blind review: people check LLM judges (docs/verifiers.md, "Judges checked
against people"); the review itself is review.blind_reviews."""

from __future__ import annotations

import hashlib
from collections import defaultdict

from django.db.models import Count

from calibration.errors import CalibrationError
from calibration.models import Outcome, Rollout
from curation.models import TaskVersion
from engine.verifiers.kinds import llm_judge
from review.models import BlindItem

JUDGED = (Outcome.PASS, Outcome.FAIL)  # an error or timeout is no verdict to check
_RANKS = 2**64


def judge_sample_rank(*, seed: int, judge: str, prompt_version: str, rollout_id: int) -> int:
    """A rollout's place in the draw, in [0, 2**64): the first 8 bytes of sha256("seed:judge:version:id")."""
    digest = hashlib.sha256(f"{seed}:{judge}:{prompt_version}:{rollout_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def judge_samples_draw(*, share: float, limit: int, seed: int = 0) -> int:
    """Draw judged rollouts for blind review; returns how many items were added.

    A rollout of a task whose verifier is ``llm_judge``, with a pass or fail verdict and its text
    still stored, is eligible when its rank (judge_sample_rank) falls in the lowest `share` of the
    range, so whether a rollout is eligible never depends on what else exists. Per (judge, prompt
    version), eligible rollouts are taken in rank order until that pair has `limit` items. Safe to
    run again: a rollout is drawn at most once (BlindItem is unique per rollout), and one drawn stays.
    """
    if not 0.0 <= share <= 1.0:
        raise CalibrationError(f"The judge sample share must be between 0 and 1; got {share}.")
    if limit < 0:
        raise CalibrationError(f"The judge sample limit must not be negative; got {limit}.")
    deciders = {
        version_id: (str(verifier.get("judge", "")), llm_judge.prompt_version(verifier))
        for version_id, verifier in TaskVersion.objects.filter(verifier__kind=llm_judge.KIND).values_list(
            "id", "verifier"
        )
    }
    drawn = BlindItem.objects.filter(kind=BlindItem.Kind.JUDGED_ROLLOUT)
    room = defaultdict(lambda: limit)
    for row in drawn.values("decided_by", "decided_version").annotate(items=Count("id")).order_by():
        room[(row["decided_by"], row["decided_version"])] = limit - row["items"]
    open_versions = [version_id for version_id, decider in deciders.items() if room[decider] > 0]
    if not open_versions or share == 0.0:
        return 0
    candidates = (
        Rollout.objects.filter(task_version_id__in=open_versions, outcome__in=JUDGED, pruned_at__isnull=True)
        .exclude(id__in=drawn.values("object_id"))
        .values_list("id", "task_version_id")
    )
    threshold = share * _RANKS
    eligible = defaultdict(list)
    for rollout_id, version_id in candidates.iterator(chunk_size=5000):
        judge, version = deciders[version_id]
        rank = judge_sample_rank(seed=seed, judge=judge, prompt_version=version, rollout_id=rollout_id)
        if rank < threshold:
            eligible[(judge, version)].append((rank, rollout_id))
    chosen = sorted(entry for decider, ranked in eligible.items() for entry in sorted(ranked)[: max(room[decider], 0)])
    rollouts = Rollout.objects.only("task_version_id", "text", "outcome").in_bulk(
        [rollout_id for _, rollout_id in chosen]
    )
    items = []
    for _, rollout_id in chosen:
        rollout = rollouts[rollout_id]
        judge, version = deciders[rollout.task_version_id]
        items.append(
            BlindItem(
                kind=BlindItem.Kind.JUDGED_ROLLOUT,
                object_id=rollout_id,
                task_version_id=rollout.task_version_id,
                content=rollout.text,
                decided_by=judge,
                decided_version=version,
                decision=rollout.outcome,
            )
        )
    before = drawn.count()
    BlindItem.objects.bulk_create(items, ignore_conflicts=True)
    return drawn.count() - before
