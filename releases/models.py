"""Releases: immutable exports of task versions with their calibration, for trainers."""

from django.conf import settings
from django.db import models

from calibration.models import ProbeModel
from curation.models import Environment, TaskVersion


class ReleaseStatus(models.TextChoices):
    PENDING = "pending"
    BUILDING = "building"
    READY = "ready"
    FAILED = "failed"


class Release(models.Model):
    """An immutable export: the filter used, the task versions it pins, a manifest and its files.

    Items snapshot the calibration at creation, so later rollouts or edits never change a release.
    """

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="releases")
    environment = models.ForeignKey(
        Environment, on_delete=models.PROTECT, null=True, blank=True, related_name="releases"
    )
    probe_model = models.ForeignKey(ProbeModel, on_delete=models.PROTECT, related_name="releases")
    filter = models.JSONField(default=dict, help_text="The filter the release was made with.")
    thresholds = models.JSONField(default=dict, help_text="Floor and retirement threshold per environment.")
    manifest = models.JSONField(default=dict, blank=True, help_text="Counts per band and domain, files and sha256.")
    status = models.CharField(max_length=20, choices=ReleaseStatus.choices, default=ReleaseStatus.PENDING)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    built_at = models.DateTimeField(null=True, blank=True)
    # Where the built files are in the default storage (curation/files.py): one folder per build attempt, so a
    # finished build only becomes visible here, whole; blank for releases built before (releases/<id>).
    files_folder = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        db_table = "curation_release"  # created by curation before releases had their own app

    def __str__(self) -> str:
        return f"release {self.pk} ({self.status})"


class ReleaseItem(models.Model):
    """One pinned task version inside a release, with its calibration as it was at release time."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="items")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT, related_name="release_items")
    attempts = models.PositiveIntegerField(null=True)
    successes = models.PositiveIntegerField(null=True)
    pass_rate = models.FloatField(null=True)
    interval_low = models.FloatField(null=True)
    interval_high = models.FloatField(null=True)
    band = models.CharField(max_length=20, blank=True)
    grpo_signal = models.FloatField(null=True)
    # The calibration's predicted_probability: set when the band was predicted for a checkpoint, not probed.
    predicted_probability = models.FloatField(null=True, blank=True)
    # The version's quality card when the release was pinned (releases/quality_cards.py); null before cards.
    quality_card = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["release", "id"]
        db_table = "curation_releaseitem"
        constraints = [models.UniqueConstraint(fields=["release", "task_version"], name="release_item_unique")]
