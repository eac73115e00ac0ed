"""Records of impossible-variant probes (calibration/services/impossible_variants.py), kept in tables of their
own: nothing that reads Rollout or Calibration (pass rates, bands, the curriculum, the similarity index,
dashboards, releases) can meet a variant or its rollouts. Imported by calibration.models."""

from django.conf import settings
from django.db import models


class VariantProbe(models.Model):
    """One impossible-variant probe of a sample of an environment's tasks with one probe model (a checkpoint is
    a probe model), under the same sampling settings a campaign of that model gets."""

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    environment = models.ForeignKey("curation.Environment", on_delete=models.CASCADE, related_name="variant_probes")
    probe_model = models.ForeignKey("calibration.ProbeModel", on_delete=models.PROTECT, related_name="variant_probes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    seed = models.BigIntegerField()
    rollouts = models.PositiveIntegerField(default=8, help_text="Rollouts per variant.")
    max_new_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The task versions asked for (the sample, or one task's current version).
    task_version_ids = models.JSONField(default=list)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The job's message was (re-)queued at; a worker at it holds a lease renewed by a heartbeat: beat re-queues a
    # running probe whose lease ran out, or whose message was lost (calibration/services/variant_leases.py).
    queued_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"impossible-variant probe {self.pk} ({self.environment_id} × {self.probe_model_id}, {self.status})"


class ImpossibleVariant(models.Model):
    """A task version's impossible variant in one probe (engine/verifiers/impossible.py): what changed, and
    whether it was ready to probe, broken (the reference or the empty answer passes it) or not derivable."""

    class Status(models.TextChoices):
        READY = "ready"
        BROKEN = "broken"
        NOT_DERIVABLE = "not_derivable"

    probe = models.ForeignKey(VariantProbe, on_delete=models.CASCADE, related_name="variants")
    task_version = models.ForeignKey(
        "curation.TaskVersion", on_delete=models.CASCADE, related_name="impossible_variants"
    )
    status = models.CharField(max_length=20, choices=Status.choices)
    kind = models.CharField(max_length=40, blank=True)
    change = models.TextField(blank=True)
    verifier = models.JSONField(null=True, blank=True)
    answer = models.TextField(null=True, blank=True)
    reason = models.TextField(blank=True)
    reference_outcome = models.CharField(max_length=200, blank=True)
    empty_outcome = models.CharField(max_length=200, blank=True)
    # Shifted answers: the task's own verifier pays the true reference on the variant (a hole without a probe).
    reference_passes = models.BooleanField(null=True)

    class Meta:
        ordering = ["probe", "task_version"]
        constraints = [
            models.UniqueConstraint(fields=["probe", "task_version"], name="impossible_variant_unique_per_probe")
        ]


class VariantRollout(models.Model):
    """One attempt at a variant: the task's own prompt, sampled as a campaign samples it, graded by the
    variant's verifier. A pass is a found hack."""

    variant = models.ForeignKey(ImpossibleVariant, on_delete=models.CASCADE, related_name="rollouts")
    sample_index = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    text = models.TextField(blank=True)
    episode = models.JSONField(null=True, blank=True)
    finish_reason = models.CharField(max_length=20, blank=True)
    generation_error = models.TextField(blank=True)
    outcome = models.CharField(max_length=20, blank=True)
    reward = models.FloatField(null=True)
    detail = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(null=True)
    output_tokens = models.PositiveIntegerField(null=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["variant", "sample_index"]
        constraints = [
            models.UniqueConstraint(fields=["variant", "sample_index"], name="variant_rollout_unique_sample")
        ]
        indexes = [models.Index(fields=["outcome"], name="variant_rollout_outcome")]
