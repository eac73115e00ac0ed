"""Writes for near-duplicates and contamination: index new versions, flag them, keep one of a cluster."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from curation import policy
from curation.errors import CurationError
from curation.models import TaskStatus, TaskVersion
from curation.services import task_transition
from engine import similarity
from review import services as review_services
from similarity.errors import SimilarityError
from similarity.models import SimilarityFlag, VersionSignature

logger = logging.getLogger(__name__)

# Versions are embedded this many at a time: one model call and one insert per batch.
INDEX_BATCH = 256


# -- the process-wide index -------------------------------------------------------------------------

_index_lock = threading.Lock()


@dataclass
class _LoadedIndex:
    """The signatures this process holds in memory, up to `last_pk`, and that row's creation time."""

    index: similarity.SimilarityIndex = field(default_factory=similarity.SimilarityIndex)
    last_pk: int = 0
    last_created_at: object = None


_loaded = _LoadedIndex()


def index_current() -> similarity.SimilarityIndex:
    """The in-memory index, brought up to date with the signature table.

    Only rows newer than the last one read are loaded. When rows went away (a deleted task, a
    rolled-back transaction whose ids were reused) the count or the last row no longer matches
    and the index is rebuilt from the table.
    """
    global _loaded
    with _index_lock:
        last = VersionSignature.objects.filter(pk=_loaded.last_pk).values_list("created_at", flat=True).first()
        stale = _loaded.last_pk and (last != _loaded.last_created_at)
        if not stale and len(_loaded.index):
            stale = VersionSignature.objects.filter(pk__lte=_loaded.last_pk).count() != len(_loaded.index)
        if stale:
            _loaded = _LoadedIndex()
        rows = (
            VersionSignature.objects.filter(pk__gt=_loaded.last_pk)
            .order_by("pk")
            .values_list(
                "pk", "task_version_id", "task_version__task_id", "numbers_key", "minhash", "embedding", "created_at"
            )
        )
        batch = []
        for row in rows.iterator(chunk_size=2000):
            batch.append(row)
            if len(batch) >= 2000:
                _index_add(batch)
                batch = []
        _index_add(batch)
        return _loaded.index


def _index_add(rows: list[tuple]) -> None:
    if not rows:
        return
    _loaded.index.add(
        ids=[row[1] for row in rows],
        groups=[row[2] for row in rows],
        numbers=[row[3] for row in rows],
        signatures=np.stack([similarity.minhash_from_bytes(row[4]) for row in rows]),
        embeddings=np.stack([similarity.embedding_from_bytes(row[5]) for row in rows]),
    )
    _loaded.last_pk, _loaded.last_created_at = rows[-1][0], rows[-1][6]


def index_forget() -> None:
    """Drop the in-memory index (after signatures were deleted on purpose); the next use reloads it."""
    global _loaded
    with _index_lock:
        _loaded = _LoadedIndex()


# -- indexing and flagging --------------------------------------------------------------------------


@dataclass
class IndexResult:
    indexed: int = 0
    checked: int = 0
    near_duplicates: int = 0
    contaminated: int = 0

    def summary(self) -> str:
        return (
            f"{self.indexed} versions indexed, {self.checked} checked: "
            f"{self.near_duplicates} near-duplicates, {self.contaminated} contaminated"
        )


def _versions_in(environment_id: int | None) -> QuerySet[TaskVersion]:
    versions = TaskVersion.objects.all()
    return versions.filter(task__environment_id=environment_id) if environment_id else versions


def versions_index(*, environment_id: int | None = None, recheck: bool = False) -> IndexResult:
    """Sign every version that has no signature yet, then check those not checked yet (all, with `recheck`).

    A check compares a version with every other task's versions (same numbers only) and with the
    benchmark reference corpus, and writes or clears its near_duplicate and contaminated flags.
    Safe to run twice and from two workers: signatures are unique per version, flags per kind, and
    a version is marked checked in the transaction that writes its flags, so a job that dies after
    signing leaves its versions for the next run.
    """
    result = IndexResult()
    unsigned = _versions_in(environment_id).filter(signature__isnull=True).order_by("pk")
    new_ids: list[int] = []
    while True:
        after = new_ids[-1] if new_ids else 0
        batch = list(unsigned.filter(pk__gt=after)[:INDEX_BATCH].values_list("pk", "prompt"))
        if not batch:
            break
        texts = [similarity.prompt_text(prompt) for _, prompt in batch]
        embeddings = similarity.embed(texts)
        VersionSignature.objects.bulk_create(
            [
                VersionSignature(
                    task_version_id=pk,
                    minhash=similarity.minhash_bytes(similarity.minhash(text)),
                    embedding=similarity.embedding_bytes(vector),
                    numbers_key=similarity.numbers_key(text),
                )
                for (pk, _), text, vector in zip(batch, texts, embeddings)
            ],
            ignore_conflicts=True,
        )
        new_ids.extend(pk for pk, _ in batch)
    result.indexed = len(new_ids)
    to_check = VersionSignature.objects.filter(task_version__in=_versions_in(environment_id))
    if not recheck:
        to_check = to_check.filter(checked=False)
    check_ids = list(to_check.order_by("task_version_id").values_list("task_version_id", flat=True))
    for start in range(0, len(check_ids), INDEX_BATCH):
        batch = check_ids[start : start + INDEX_BATCH]
        # The comparisons run with no transaction open; only their flags are written in one, a few versions at
        # a time (on SQLite a transaction holds the one write lock that sign-ins and uploads wait for).
        decisions = _versions_check(batch, result)
        for write_start in range(0, len(batch), WRITE_BATCH):
            written = batch[write_start : write_start + WRITE_BATCH]
            cleared: dict[str, list[int]] = {}
            with transaction.atomic():
                for version_id in written:
                    for kind, values in decisions.get(version_id, {}).items():
                        if values is None:
                            cleared.setdefault(kind, []).append(version_id)
                        else:
                            _flag_set(version_id, kind, **values)
                for kind, version_ids in cleared.items():  # one statement a kind: most versions have no flag
                    _flags_clear(version_ids, kind)
                VersionSignature.objects.filter(task_version_id__in=written).update(checked=True)
    return result


# Versions whose flags are written per transaction: few, so that a batch of new flags (a read, a savepoint and
# an insert each) holds SQLite's write lock briefly even on a loaded machine (docs/benchmarks.md, busy day).
WRITE_BATCH = 8


def _versions_check(version_ids: list[int], result: IndexResult) -> dict[int, dict[str, dict | None]]:
    """Compare the versions with the index and the reference corpus; returns, per version and flag kind, the
    flag's values, or None to clear it. Reads only."""
    index = index_current()
    rows = list(
        VersionSignature.objects.filter(task_version_id__in=version_ids)
        .order_by("task_version_id")
        .values_list(
            "task_version_id", "task_version__task_id", "numbers_key", "minhash", "embedding", "task_version__prompt"
        )
    )
    if not rows:
        return {}
    embeddings = np.stack([similarity.embedding_from_bytes(row[4]) for row in rows])
    pairs = index.nearest(
        signatures=np.stack([similarity.minhash_from_bytes(row[3]) for row in rows]),
        embeddings=embeddings,
        groups=[row[1] for row in rows],
        numbers=[row[2] for row in rows],
    )
    corpus = similarity.reference_corpus()
    thresholds = dict(jaccard_at=settings.PASSBAND_DUPLICATE_JACCARD, cosine_at=settings.PASSBAND_DUPLICATE_COSINE)
    decisions: dict[int, dict[str, dict | None]] = {}
    for row, pair, embedding in zip(rows, pairs, embeddings):
        version_id = row[0]
        result.checked += 1
        flags: dict[str, dict | None] = {
            SimilarityFlag.Kind.NEAR_DUPLICATE: None,
            SimilarityFlag.Kind.CONTAMINATED: None,
        }
        neighbour = similarity.best_neighbour(pair, **thresholds)
        if neighbour is not None:
            result.near_duplicates += 1
            flags[SimilarityFlag.Kind.NEAR_DUPLICATE] = dict(
                neighbour_id=neighbour.id, jaccard=neighbour.jaccard, cosine=neighbour.cosine
            )
        match = corpus.match(text=similarity.prompt_text(row[5]), embedding=embedding)
        if similarity.is_contaminated(
            match,
            overlap_at=settings.PASSBAND_CONTAMINATION_OVERLAP,
            cosine_at=settings.PASSBAND_CONTAMINATION_COSINE,
        ):
            result.contaminated += 1
            flags[SimilarityFlag.Kind.CONTAMINATED] = dict(
                reference_source=match.item.source,
                reference_item=match.item.item_id,
                reference_text=match.item.text,
                cosine=match.cosine,
                shared_ngrams=match.shared_ngrams,
                task_ngrams=match.task_ngrams,
                reference_ngrams=match.item_ngrams,
            )
        decisions[version_id] = flags
    return decisions


def _flag_set(version_id: int, kind: str, **values) -> None:
    """Write the flag. A reviewer's resolution stays while the flag names the same neighbour or item."""
    flag = SimilarityFlag.objects.filter(task_version_id=version_id, kind=kind).first()
    if flag is None:
        try:
            with transaction.atomic():  # a savepoint: another job may write the same flag first
                SimilarityFlag.objects.create(task_version_id=version_id, kind=kind, **values)
            return
        except IntegrityError:
            flag = SimilarityFlag.objects.get(task_version_id=version_id, kind=kind)
    same_match = flag.neighbour_id == values.get("neighbour_id") and flag.reference_item == values.get(
        "reference_item", ""
    )
    if not same_match:
        values.update(resolved_at=None, resolved_by=None, resolution="")
    SimilarityFlag.objects.filter(pk=flag.pk).update(**values)


def _flags_clear(version_ids: list[int], kind: str) -> None:
    """Versions no longer over the threshold (after a recheck) lose their open flag of this kind."""
    SimilarityFlag.objects.filter(task_version_id__in=version_ids, kind=kind, resolved_at__isnull=True).delete()


def signatures_drop(*, environment_id: int | None = None) -> int:
    """Delete the signatures (and open flags) in scope, so the next index run computes them again."""
    versions = _versions_in(environment_id)
    SimilarityFlag.objects.filter(task_version__in=versions, resolved_at__isnull=True).delete()
    deleted, _ = VersionSignature.objects.filter(task_version__in=versions).delete()
    index_forget()
    return deleted


def cluster_dismiss(*, versions: list[TaskVersion], by: AbstractBaseUser) -> int:
    """Resolve the open near-duplicate flags among these versions as "not duplicates"; no status changes.

    Reviewers and staff only. Returns how many flags were resolved; a recheck does not reopen them.
    """
    if not policy.is_reviewer(by):
        raise SimilarityError("Only reviewers and staff can resolve near-duplicates.")
    ids = [version.pk for version in versions]
    return SimilarityFlag.objects.filter(
        task_version_id__in=ids,
        neighbour_id__in=ids,
        kind=SimilarityFlag.Kind.NEAR_DUPLICATE,
        resolved_at__isnull=True,
    ).update(resolved_at=timezone.now(), resolved_by=by, resolution="not duplicates")


# -- clusters -----------------------------------------------------------------------------------------

# What "keep one" does to each other task of a cluster, by its status.
RETIRE_FROM = (TaskStatus.APPROVED, TaskStatus.ACTIVE)
OUT_ALREADY = (TaskStatus.REJECTED, TaskStatus.RETIRED)


@dataclass
class KeepOneResult:
    kept: str
    retired: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"Kept {self.kept}"]
        if self.retired:
            parts.append(f"retired {', '.join(self.retired)}")
        if self.rejected:
            parts.append(f"rejected {', '.join(self.rejected)}")
        if self.unchanged:
            parts.append(f"left {', '.join(self.unchanged)} (already out)")
        if self.refused:
            parts.append("could not change " + "; ".join(self.refused))
        return "; ".join(parts) + "."


def cluster_keep_one(*, keep: TaskVersion, others: list[TaskVersion], by: AbstractBaseUser) -> KeepOneResult:
    """Keep one task of a near-duplicate cluster and take the others out of the corpus.

    Reviewers and staff only. Approved or active tasks are retired; submitted or in-review tasks are
    rejected through the review services (so the same rules hold: nobody rejects their own task);
    drafts and sent-back tasks belong to their authors and are refused with the reason. The
    cluster's open near-duplicate flags are resolved.
    """
    if not policy.is_reviewer(by):
        raise SimilarityError("Only reviewers and staff can resolve near-duplicates.")
    if any(version.pk == keep.pk for version in others):
        raise SimilarityError("The task to keep cannot also be one to take out.")
    result = KeepOneResult(kept=str(keep.task))
    reason = f"near-duplicate of {keep.task} (kept)"
    for version in others:
        task = version.task
        try:
            with transaction.atomic():
                if task.status in RETIRE_FROM:
                    task_transition(task=task, to_status=TaskStatus.RETIRED, by=by, reason=reason)
                    result.retired.append(str(task))
                elif task.status in review_services.REVIEWABLE:
                    review_services.review_reject(task=task, reviewer=by, comment=reason, defect="duplicate")
                    result.rejected.append(str(task))
                elif task.status in OUT_ALREADY:
                    result.unchanged.append(str(task))
                else:
                    raise CurationError(f"it is {task.status}: its author has not submitted it")
        except CurationError as error:
            result.refused.append(f"{task}: {error}")
    done_ids = [keep.pk] + [
        version.pk for version in others if str(version.task) in result.retired + result.rejected + result.unchanged
    ]
    SimilarityFlag.objects.filter(
        task_version_id__in=done_ids,
        neighbour_id__in=done_ids,
        kind=SimilarityFlag.Kind.NEAR_DUPLICATE,
        resolved_at__isnull=True,
    ).update(resolved_at=timezone.now(), resolved_by=by, resolution=f"kept {keep.task}")
    return result
