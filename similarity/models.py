"""What the near-duplicate and contamination checks keep: each version's signature, and the flags they raise."""

from django.conf import settings
from django.db import models

from curation.models import TaskVersion
from engine import similarity


class VersionSignature(models.Model):
    """A task version's MinHash, embedding and numbers key, computed once (versions are immutable).

    Vectors are little-endian float32 / uint32 bytes, so PostgreSQL and SQLite store them alike;
    the search runs in numpy (engine.similarity.SimilarityIndex).
    """

    task_version = models.OneToOneField(TaskVersion, on_delete=models.CASCADE, related_name="signature")
    minhash = models.BinaryField()
    embedding = models.BinaryField()
    numbers_key = models.BigIntegerField()
    model = models.CharField(max_length=80, default=similarity.EMBEDDING_MODEL)
    created_at = models.DateTimeField(auto_now_add=True)
    # Compared with the corpus and its flags written: a job that dies between signing and checking
    # leaves this False, and the next run checks the version.
    checked = models.BooleanField(default=False)

    class Meta:
        ordering = ["pk"]


class SimilarityFlag(models.Model):
    """A version that is a near-duplicate of another, or contaminated by a public benchmark item.

    One flag per version and kind; a reviewer resolves it (keep one of a cluster, or dismiss).
    """

    class Kind(models.TextChoices):
        NEAR_DUPLICATE = "near_duplicate"
        CONTAMINATED = "contaminated"

    task_version = models.ForeignKey(TaskVersion, on_delete=models.CASCADE, related_name="similarity_flags")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    neighbour = models.ForeignKey(TaskVersion, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    reference_source = models.CharField(max_length=80, blank=True)
    reference_item = models.CharField(max_length=200, blank=True)
    reference_text = models.TextField(blank=True)
    jaccard = models.FloatField(null=True, blank=True)
    cosine = models.FloatField(null=True, blank=True)
    shared_ngrams = models.PositiveIntegerField(null=True, blank=True)
    task_ngrams = models.PositiveIntegerField(null=True, blank=True)
    reference_ngrams = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    resolution = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["task_version", "kind"]
        constraints = [models.UniqueConstraint(fields=["task_version", "kind"], name="similarity_flag_once_per_kind")]
        indexes = [models.Index(fields=["kind", "resolved_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.task_version}"

    @property
    def ngram_overlap(self) -> float | None:
        """Shared 13-grams over the smaller side's: the task's, or the reference item's if shorter."""
        if self.shared_ngrams is None or not (self.task_ngrams or self.reference_ngrams):
            return None
        return similarity.ngram_overlap(self.shared_ngrams, self.task_ngrams or 0, self.reference_ngrams or 0)
