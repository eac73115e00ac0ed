"""Record how an environment's worlds behave (calibration.models.EpisodeHealth), one call per batch of episodes.

The round pipeline calls `episode_health_record` after it ran a batch of one task version's episodes: how
many were attempted, which the world failed, their tool calls and reset latencies. One upsert of one row
per (environment, world, minute), so recording costs a query or two per batch, not per episode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from calibration.models import EpisodeHealth
from curation.models import Environment

# Tool-call outcomes that are the world's fault (engine.episodes.runner.OBSERVATION_STATUSES): a tool that
# crashed or ran past its time. Malformed calls, unknown tools and bad arguments are the model's.
WORLD_TOOL_ERRORS = ("tool_error", "timeout")


@dataclass(frozen=True)
class EpisodeAttempt:
    """One episode as the world saw it: its transcript when it ran, or why the world failed it."""

    transcript: dict | None = None
    failure: str = ""


def episode_health_record(
    *, environment: Environment, world: str, attempts: Sequence[EpisodeAttempt], now: datetime | None = None
) -> None:
    """Add a batch of episode attempts on `world` of `environment` to the current minute's row."""
    if not attempts:
        return
    minute = (now or timezone.now()).replace(second=0, microsecond=0)
    failures = [attempt.failure for attempt in attempts if attempt.failure]
    transcripts = [attempt.transcript for attempt in attempts if not attempt.failure and attempt.transcript]
    resets = [float(t["reset_ms"]) for t in transcripts if isinstance(t.get("reset_ms"), (int, float))]
    counts = [t.get("counts") or {} for t in transcripts]
    increments = {
        "episodes": F("episodes") + len(attempts),
        "failures": F("failures") + len(failures),
        "tool_calls": F("tool_calls") + sum(int(c.get("tool_calls", 0)) for c in counts),
        "tool_errors": F("tool_errors") + sum(int(c.get(s, 0)) for c in counts for s in WORLD_TOOL_ERRORS),
        "resets": F("resets") + len(resets),
        "reset_ms_total": F("reset_ms_total") + sum(resets),
        "reset_ms_max": Greatest(F("reset_ms_max"), max(resets, default=0.0)),
    }
    if failures:
        increments["last_error"] = failures[-1][:2000]
    key = {"environment": environment, "world": world[:120], "minute": minute}
    row = EpisodeHealth.objects.filter(**key).values_list("pk", flat=True).first()
    if row is None:
        try:
            with transaction.atomic():
                row = EpisodeHealth.objects.create(**key).pk
        except IntegrityError:  # another worker created this minute's row first
            row = EpisodeHealth.objects.filter(**key).values_list("pk", flat=True).get()
    EpisodeHealth.objects.filter(pk=row).update(**increments)


def episode_health_prune(*, older_than: timedelta, now: datetime | None = None) -> int:
    """Delete health rows of minutes more than `older_than` ago (the page reads the last hour). Returns how many."""
    deleted, _ = EpisodeHealth.objects.filter(minute__lt=(now or timezone.now()) - older_than).delete()
    return deleted
