"""Reads for curation: comment threads (which tasks a user may see: curation.policy).

Reads that join calibrations (the task list, the review queue) live in calibration.selectors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Count, F, Q
from django.db.models.fields.json import KT

from curation import policy
from curation.models import Comment, Environment, Task, TaskStatus, TaskVersion
from engine.episodes import plugin_packages, plugins
from engine.verifiers.registry import all_kinds, kind_named

logger = logging.getLogger(__name__)


def comment_threads(*, task: Task) -> list[Comment]:
    """Root comments of a task, oldest first, each with `thread_replies` (oldest first)."""
    comments = list(Comment.objects.filter(task=task).select_related("author", "resolved_by"))
    roots = [comment for comment in comments if comment.parent_id is None]
    by_root: dict[int, list[Comment]] = {}
    for comment in comments:
        if comment.parent_id is not None:
            by_root.setdefault(comment.parent_id, []).append(comment)
    for root in roots:
        root.thread_replies = by_root.get(root.pk, [])
    return roots


@dataclass(frozen=True)
class EnvironmentWorld:
    """A tool environment (plug-in) that tasks of a curation environment run in, as its page shows it."""

    name: str
    tasks: int  # current task versions (visible to the reader) whose verifier names it
    plugin: plugins.Plugin | None  # None when it is not installed or was refused
    error: str  # what is wrong and what to do, "" when the plug-in is installed
    # Its own packages (REQUIREMENTS): each with its version and hash prefixes, and whether its package
    # environment is installed on this host (engine.episodes.plugin_packages.lock_report); None without a lock.
    lock: dict[str, Any] | None = None


def environment_worlds(*, environment: Environment, user: AbstractBaseUser) -> list[EnvironmentWorld]:
    """The plug-ins the environment's tasks (those `user` may see) and its default verifier name, by name."""
    visible = policy.tasks_visible_to(user).filter(environment=environment).values("current_version_id")
    rows = (
        TaskVersion.objects.filter(pk__in=visible)
        .values(world=KT("verifier__environment"))
        .annotate(count=Count("id"))
        .order_by()
    )
    counts = {row["world"]: row["count"] for row in rows}
    default = (environment.default_verifier or {}).get("environment")
    names = {name for name in counts if isinstance(name, str) and name}
    if isinstance(default, str) and default:
        names.add(default)
    worlds = []
    for name in sorted(names):
        try:
            plugin = plugins.get(name)
            lock = plugin_packages.lock_report(plugin)
            worlds.append(EnvironmentWorld(name=name, tasks=counts.get(name, 0), plugin=plugin, error="", lock=lock))
        except plugins.UnknownEnvironment as error:
            worlds.append(EnvironmentWorld(name=name, tasks=counts.get(name, 0), plugin=None, error=str(error)))
    return worlds


@dataclass(frozen=True)
class TaskSource:
    """Tasks of an environment that another framework generates and scores, as its page shows them."""

    kind: str  # the verifier kind
    source: str  # the generator or taskset, as the verifier config names it
    package: str
    version: str  # the installed version, "" when the package is not installed here
    tasks: int  # current task versions (visible to the reader) from this source


def environment_task_sources(*, environment: Environment, user: AbstractBaseUser) -> list[TaskSource]:
    """The outside frameworks the environment's tasks that `user` may see come from (the kinds that declare an
    ``outside_source``: the config field naming the source and the package providing it), by kind and source,
    with the installed version of each package."""
    from importlib import metadata

    visible = policy.tasks_visible_to(user).filter(environment=environment).values("current_version_id")
    sources: list[TaskSource] = []
    declared = sorted((kind.name, kind.outside_source) for kind in all_kinds() if kind.outside_source is not None)
    for kind, outside_source in declared:
        field, package = outside_source.field, outside_source.package
        rows = (
            TaskVersion.objects.filter(pk__in=visible, verifier__kind=kind)
            .values(source=KT(f"verifier__{field}"))
            .annotate(count=Count("id"))
            .order_by("source")
        )
        for row in rows:
            source = str(row["source"] or "")
            distribution = package or source
            try:
                version = metadata.version(distribution)
            except (metadata.PackageNotFoundError, ValueError):
                version = ""
            sources.append(
                TaskSource(kind=kind, source=source, package=distribution, version=version, tasks=row["count"])
            )
    return sources


def task_verifier_page(*, task_version) -> dict | None:
    """What a task's page shows below its verifier config, from the kind's ``page_fragment`` and
    ``page_context`` (engine/verifiers/kind.py): ``{"template", ...context}``; a ``snapshot`` digest in the
    context adds ``files``, the snapshot's paths (None when the storage cannot give them). None for a kind
    that declares no fragment, or one not registered here."""
    verifier = (task_version.verifier or {}) if task_version is not None else {}
    kind = kind_named(verifier.get("kind"))
    if kind is None or not kind.page_fragment:
        return None
    from django.template import TemplateDoesNotExist
    from django.template.loader import get_template

    try:
        get_template(kind.page_fragment)
    except TemplateDoesNotExist:  # an installed kind naming a template no app provides: the page goes on
        logger.warning("verifier kind %s: no template folder holds %s", kind.name, kind.page_fragment)
        return None
    page: dict[str, Any] = {"template": kind.page_fragment}
    if kind.page_context is not None:
        page.update(kind.page_context(verifier))
    if page.get("snapshot"):
        from curation.repo_snapshots import snapshot_files
        from engine.repo_tasks.snapshots import SnapshotError

        try:
            page["files"] = snapshot_files(digest=page["snapshot"])
        except (OSError, SnapshotError):
            page["files"] = None
    return page


def plugin_task_seeds(*, environment: str) -> dict[int, list[str]]:
    """The world seeds the current versions of tasks name for plug-in `environment` (their verifier's
    `environment` and `seed`, 0 when none), each with those tasks' keys: what `environments --check` resets."""
    seeds: dict[int, list[str]] = {}
    versions = TaskVersion.objects.filter(task__current_version=F("pk"), verifier__environment=environment)
    for key, verifier in versions.values_list("task__key", "verifier").order_by("task__key"):
        seed = (verifier or {}).get("seed", 0)
        if isinstance(seed, int) and not isinstance(seed, bool):
            seeds.setdefault(seed, []).append(key)
    return seeds


def tasks_submittable(*, tasks, user: AbstractBaseUser):
    """Of `tasks`, those `user` could submit for review now (the rule tasks_submit_bulk applies): their
    own (staff: any), in a status that may move to submitted, whose current version did not fail its audit."""
    from curation.services import ALLOWED_TRANSITIONS

    statuses = [status for status, targets in ALLOWED_TRANSITIONS.items() if TaskStatus.SUBMITTED in targets]
    submittable = tasks.filter(status__in=statuses).exclude(current_version__audit_passed=False)
    return submittable if user.is_staff else submittable.filter(owner=user)


GAMEABLE = "gameable"


def gameable_q(*, version: str = "current_version") -> Q:
    """Task versions (at the path `version`; "" for TaskVersion itself) whose verifier the gameability
    audit found a degenerate answer for, with no reviewer override: one rule for every list and filter."""
    prefix = f"{version}__" if version else ""
    return Q(**{f"{prefix}gameable": True, f"{prefix}gameable_override_at__isnull": True})
