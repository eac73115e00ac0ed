"""Reads for near-duplicates and contamination: a version's flags, clusters, and filters for task lists."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, F, OuterRef, QuerySet

from curation.models import Environment, Task, TaskVersion
from curation.policy import tasks_visible_to
from engine import similarity
from similarity.models import SimilarityFlag

FLAG_KINDS = [SimilarityFlag.Kind.NEAR_DUPLICATE.value, SimilarityFlag.Kind.CONTAMINATED.value]
FLAG_CHOICES = [
    (SimilarityFlag.Kind.NEAR_DUPLICATE.value, "near-duplicate"),
    (SimilarityFlag.Kind.CONTAMINATED.value, "contaminated"),
]


def version_flags(*, task_version: TaskVersion | None, user: AbstractBaseUser) -> list[SimilarityFlag]:
    """The version's near-duplicate and contamination flags, open ones first, ready to show side by side.

    Each flag carries `text` (the task's prompt text) and `other_text` (the neighbour's or the
    benchmark item's). A neighbour that `user` may not see is named by no key and no text
    (`neighbour_visible` is False).
    """
    if task_version is None:
        return []
    flags = list(
        SimilarityFlag.objects.filter(task_version=task_version)
        .select_related("neighbour__task__environment", "resolved_by")
        .order_by(F("resolved_at").asc(nulls_first=True), "kind")
    )
    neighbour_tasks = [flag.neighbour.task_id for flag in flags if flag.neighbour_id]
    visible = set(tasks_visible_to(user).filter(pk__in=neighbour_tasks).values_list("pk", flat=True))
    text = similarity.prompt_text(task_version.prompt)
    for flag in flags:
        flag.text = text
        flag.neighbour_visible = bool(flag.neighbour_id) and flag.neighbour.task_id in visible
        if flag.kind == SimilarityFlag.Kind.CONTAMINATED:
            flag.other_text = flag.reference_text
        else:
            flag.other_text = similarity.prompt_text(flag.neighbour.prompt) if flag.neighbour_visible else ""
    return flags


def flagged(kind: str, *, version: str = "current_version") -> Exists:
    """An Exists() for a Task (or, with version="pk", a TaskVersion) query: its version has an open `kind` flag."""
    return Exists(SimilarityFlag.objects.filter(task_version=OuterRef(version), kind=kind, resolved_at__isnull=True))


def tasks_filter_flag(tasks: QuerySet[Task], *, kind: str, present: bool = True) -> QuerySet[Task]:
    """Tasks whose current version has (or, with present=False, has not) an open flag of `kind`."""
    condition = flagged(kind)
    return tasks.filter(condition if present else ~condition)


@dataclass
class Cluster:
    """Near-duplicate tasks linked by open flags, oldest version first, with the best similarity seen."""

    versions: list[TaskVersion]
    cosine: float
    jaccard: float


def near_duplicate_clusters(*, environment: Environment | None = None) -> list[Cluster]:
    """Connected groups of current versions joined by open near-duplicate flags, largest first.

    A flag links a version and its neighbour; both must still be their task's current version.
    """
    flags = SimilarityFlag.objects.filter(
        kind=SimilarityFlag.Kind.NEAR_DUPLICATE,
        resolved_at__isnull=True,
        task_version__task__current_version=F("task_version"),
        neighbour__task__current_version=F("neighbour"),
    )
    if environment is not None:
        flags = flags.filter(task_version__task__environment=environment)
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    edges = list(flags.values_list("task_version_id", "neighbour_id", "cosine", "jaccard"))
    for left, right, _, _ in edges:
        parent[root(left)] = root(right)
    members: dict[int, list[int]] = {}
    for node in list(parent):
        members.setdefault(root(node), []).append(node)
    versions = TaskVersion.objects.select_related("task__environment", "task__owner").in_bulk(list(parent))
    best: dict[int, tuple[float, float]] = {}
    for left, _, cosine, jaccard in edges:
        group = root(left)
        seen = best.get(group, (0.0, 0.0))
        best[group] = (max(seen[0], cosine or 0.0), max(seen[1], jaccard or 0.0))
    clusters = [
        Cluster(
            versions=sorted((versions[pk] for pk in ids if pk in versions), key=lambda version: version.pk),
            cosine=best[group][0],
            jaccard=best[group][1],
        )
        for group, ids in members.items()
    ]
    return sorted(clusters, key=lambda cluster: (-len(cluster.versions), cluster.versions[0].pk))


def cluster_of(*, version_id: int | None, environment: Environment | None = None) -> Cluster | None:
    """The open cluster holding this version, or None."""
    if version_id is None:
        return None
    return next(
        (
            cluster
            for cluster in near_duplicate_clusters(environment=environment)
            if version_id in {v.pk for v in cluster.versions}
        ),
        None,
    )
