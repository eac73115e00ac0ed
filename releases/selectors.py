"""Reads for releases: which releases a user may see, the task versions one pins of an environment, and what
changed between two releases."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from curation import policy
from curation.models import Environment, TaskVersion
from releases.errors import ReleaseError
from releases.models import Release


def releases_visible_to(user: AbstractBaseUser) -> QuerySet[Release]:
    """The releases `user` may see (curation.policy.release_may_see)."""
    return Release.objects.select_related("probe_model", "created_by").filter(policy.releases_visible_q(user))


def releases_pinning(*, user: AbstractBaseUser, environment: Environment) -> QuerySet[Release]:
    """The releases `user` may see that pin a task of `environment`, newest first: the choices of the
    dashboard's re-profile form (release_environment_versions resolves the one picked)."""
    return releases_visible_to(user).filter(items__task_version__task__environment=environment).distinct()


def release_environment_versions(
    *, user: AbstractBaseUser, release_id: int, environment: Environment
) -> list[TaskVersion]:
    """The task versions release `release_id` pins of `environment`: the scope of a checkpoint re-profile of
    a release's tasks, for the API's `release`, the dashboard's release picker and reprofile_checkpoint
    --release alike. Http404 when there is no such release or `user` may not see it (curation.policy);
    ReleaseError when it pins none of the environment's tasks."""
    release = policy.get_for(user, policy.SEE, Release.objects.all(), pk=release_id)
    versions = list(
        TaskVersion.objects.filter(release_items__release=release, task__environment=environment)
        .distinct()
        .order_by("pk")
    )
    if not versions:
        raise ReleaseError(f"Release {release.pk} pins no task of {environment.name}.")
    return versions


@dataclass(frozen=True)
class DiffRow:
    """One task in a release diff: its version number and band in each release ("" / None where absent)."""

    environment: str
    key: str
    old_version: int | None
    new_version: int | None
    old_band: str
    new_band: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReleaseDiff:
    """What changed from release `old` to release `new`, task by task (a task is its durable key)."""

    old: int
    new: int
    added: list[DiffRow]
    removed: list[DiffRow]
    changed: list[DiffRow]  # in both, with another version or another band
    unchanged: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "added": [row.as_dict() for row in self.added],
            "removed": [row.as_dict() for row in self.removed],
            "changed": [row.as_dict() for row in self.changed],
            "unchanged": self.unchanged,
        }


def _release_tasks(release: Release) -> dict[int, tuple[str, str, int, str]]:
    rows = release.items.values_list(
        "task_version__task_id",
        "task_version__task__environment__name",
        "task_version__task__key",
        "task_version__number",
        "band",
    )
    return {task: (environment, key, number, band) for task, environment, key, number, band in rows}


def release_diff(*, old: Release, new: Release) -> ReleaseDiff:
    """Tasks added, removed, and changed (version or band) from `old` to `new`, each list by environment and key."""
    before, after = _release_tasks(old), _release_tasks(new)
    added, removed, changed = [], [], []
    for task in before.keys() | after.keys():
        was, now = before.get(task), after.get(task)
        environment, key = (now or was)[:2]  # type: ignore[index]
        row = DiffRow(
            environment=environment,
            key=key,
            old_version=was[2] if was else None,
            new_version=now[2] if now else None,
            old_band=was[3] if was else "",
            new_band=now[3] if now else "",
        )
        if was is None:
            added.append(row)
        elif now is None:
            removed.append(row)
        elif (was[2], was[3]) != (now[2], now[3]):
            changed.append(row)
    order = lambda row: (row.environment, row.key)  # noqa: E731
    unchanged = len(before.keys() & after.keys()) - len(changed)
    return ReleaseDiff(
        old.pk, new.pk, sorted(added, key=order), sorted(removed, key=order), sorted(changed, key=order), unchanged
    )
