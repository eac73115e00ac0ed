"""GET /api/v1/calibrations and /api/v1/rollouts: calibrations and rollouts with token ids and logprobs."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from api.views import base
from calibration.models import Band, Calibration, Diagnosis, Outcome, Rollout
from curation import policy
from engine import packing


class CalibrationSerializer(serializers.Serializer):
    task = serializers.CharField(source="task_version.task.key")
    environment = serializers.CharField(source="task_version.task.environment.name")
    version = serializers.IntegerField(source="task_version.number")
    version_hash = serializers.CharField(source="task_version.content_hash")
    probe_model = serializers.CharField(source="probe_model.name")
    attempts = serializers.IntegerField()
    successes = serializers.IntegerField()
    verifier_errors = serializers.IntegerField()
    tampered = serializers.IntegerField(help_text="Verdicts of tampered: an answer subverted the grading.")
    pass_rate = serializers.FloatField(allow_null=True)
    interval = serializers.SerializerMethodField()
    band = serializers.CharField()
    band_predicted = serializers.SerializerMethodField(
        help_text="True when no rollout decided the band: predicted for a checkpoint (docs/prediction.md)."
    )
    predicted_probability = serializers.FloatField(
        allow_null=True, help_text="The predicted band's probability; null when the band was probed."
    )
    diagnosis = serializers.CharField(
        help_text="too_hard only: suspect_verifier, truncated or hard (docs/verifiers.md); empty otherwise."
    )
    diagnosis_evidence = serializers.JSONField(
        help_text="What shows the diagnosis: counts, and examples with their rollout ids and excerpts."
    )
    decided = serializers.BooleanField()
    grpo_signal = serializers.FloatField(allow_null=True)
    cost_usd = serializers.DecimalField(
        max_digits=14, decimal_places=6, coerce_to_string=False, help_text="Probing spend: its rollouts' cost_usd."
    )
    flags = serializers.JSONField()
    updated_at = serializers.DateTimeField()

    def get_interval(self, calibration) -> list[float | None]:
        return [calibration.interval_low, calibration.interval_high]

    def get_band_predicted(self, calibration) -> bool:
        return calibration.predicted_probability is not None


class CalibrationFilters(serializers.Serializer):
    environment = serializers.CharField(required=False)
    model = serializers.CharField(required=False, help_text="Probe model name.")
    band = serializers.ChoiceField(choices=Band.values, required=False)
    diagnosis = serializers.ChoiceField(choices=Diagnosis.values, required=False, help_text="A too_hard diagnosis.")
    task = serializers.CharField(required=False, help_text="Task key.")
    updated_since = serializers.DateTimeField(required=False)


@extend_schema(parameters=[CalibrationFilters])
@policy.api("api_calibration_list")
class CalibrationList(base.LookupFilteredList):
    """GET /api/v1/calibrations: every (task version, probe model) calibration you may see, in id order."""

    serializer_class = CalibrationSerializer

    filters_class = CalibrationFilters
    lookups = {
        "environment": "task_version__task__environment__name",
        "model": "probe_model__name",
        "band": "band",
        "diagnosis": "diagnosis",
        "task": "task_version__task__key",
        "updated_since": "updated_at__gte",
    }

    def base_queryset(self):
        return Calibration.objects.select_related("task_version__task__environment", "probe_model").filter(
            task_version__task__in=policy.tasks_visible_to(self.request.user).values("pk")
        )


class RolloutSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    campaign = serializers.IntegerField(source="campaign_id")
    task = serializers.CharField(source="task_version.task.key")
    environment = serializers.CharField(source="task_version.task.environment.name")
    version_hash = serializers.CharField(source="task_version.content_hash")
    probe_model = serializers.CharField(source="probe_model.name")
    sample_index = serializers.IntegerField()
    seed = serializers.IntegerField()
    prompt_token_ids = serializers.SerializerMethodField()
    completion_token_ids = serializers.SerializerMethodField()
    logprobs = serializers.SerializerMethodField()
    text = serializers.CharField()
    finish_reason = serializers.CharField()
    truncated = serializers.BooleanField()
    capture = serializers.CharField(
        help_text="exact (ids, one logprob each), ids_only, or text_only (the server gave no ids); "
        "empty for a failed generation or a rollout from before it was recorded."
    )
    logprob_source = serializers.CharField(
        help_text="The distribution the logprobs come from: pre_sampling (the model's own softmax, before "
        "temperature and top-p: llama.cpp, the in-process model) or raw_logprobs (vLLM's default)."
    )
    prompt_ids_source = serializers.CharField(
        help_text="server (in the answer), tokenize_endpoint (the server's tokenizer on the rendered prompt) or model."
    )
    outcome = serializers.CharField(allow_null=True)
    reward = serializers.FloatField(allow_null=True)
    detail = serializers.CharField()
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    device_ms = serializers.FloatField(
        allow_null=True, help_text="Its share of its batch's device time, by the tokens it generated."
    )
    cost_usd = serializers.DecimalField(
        max_digits=14,
        decimal_places=8,
        coerce_to_string=False,
        help_text="Device time at the GPU-hour price plus tokens at the token prices (calibration/costs.py).",
    )
    created_at = serializers.DateTimeField()

    # Token ids and logprobs exactly as the backend produced them, unpacked from their stored arrays.
    def get_prompt_token_ids(self, rollout) -> list[int] | None:
        return packing.unpack_tokens(rollout.prompt_token_ids)

    def get_completion_token_ids(self, rollout) -> list[int] | None:
        return packing.unpack_tokens(rollout.completion_token_ids)

    def get_logprobs(self, rollout) -> list[float] | None:
        return packing.unpack_logprobs(rollout.logprobs)


class RolloutFilters(serializers.Serializer):
    environment = serializers.CharField(required=False)
    task = serializers.CharField(required=False, help_text="Task key.")
    model = serializers.CharField(required=False, help_text="Probe model name.")
    campaign = serializers.IntegerField(required=False, min_value=1)
    outcome = serializers.ChoiceField(choices=Outcome.values, required=False)


@extend_schema(parameters=[RolloutFilters])
@policy.api("api_rollout_list")
class RolloutList(base.LookupFilteredList):
    """GET /api/v1/rollouts: attempts with their token ids and logprobs, for offline analysis, in id order."""

    serializer_class = RolloutSerializer

    filters_class = RolloutFilters
    lookups = {
        "environment": "task_version__task__environment__name",
        "task": "task_version__task__key",
        "model": "probe_model__name",
        "campaign": "campaign_id",
        "outcome": "outcome",
    }

    def base_queryset(self):
        return Rollout.objects.select_related("task_version__task__environment", "probe_model").filter(
            task_version__task__in=policy.tasks_visible_to(self.request.user).values("pk")
        )
