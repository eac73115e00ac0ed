"""GET /api/v1/tasks: tasks with their calibration under one probe model."""

from django.utils.functional import cached_property
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError

from api.views import base
from calibration.models import Band, Diagnosis
from curation import policy
from curation.models import TaskStatus
from releases import task_filters

# The columns TaskSerializer reads (the calibration comes from annotations).
ROW_FIELDS = (
    "key",
    "status",
    "environment",
    "environment__name",
    "current_version",
) + tuple(
    f"current_version__{name}"
    for name in (
        "number",
        "content_hash",
        "domain",
        "prompt",
        "answer",
        "verifier",
        "metadata",
        "authoring_cost_usd",
        "declared_difficulty",
    )
)


class TaskSerializer(serializers.Serializer):
    key = serializers.CharField()
    environment = serializers.CharField(source="environment.name")
    status = serializers.CharField()
    version = serializers.IntegerField(source="current_version.number")
    version_hash = serializers.CharField(source="current_version.content_hash")
    domain = serializers.CharField(source="current_version.domain")
    prompt = serializers.JSONField(source="current_version.prompt")
    answer = serializers.CharField(source="current_version.answer")
    verifier = serializers.JSONField(source="current_version.verifier")
    metadata = serializers.JSONField(source="current_version.metadata")
    authoring_cost_usd = serializers.DecimalField(
        source="current_version.authoring_cost_usd",
        max_digits=10,
        decimal_places=2,
        coerce_to_string=False,
        allow_null=True,
        help_text="Null: the author did not give one.",
    )
    difficulty = serializers.FloatField(
        source="current_version.declared_difficulty",
        allow_null=True,
        help_text="The author's declared difficulty (higher: harder), or null.",
    )
    calibration = serializers.SerializerMethodField()

    def to_representation(self, task) -> dict:
        """The fields above, read directly: DRF's machinery per field cost more than the rest of a page of
        100 tasks. tests/api/test_tasks.py holds it equal to the fields' own output."""
        version = task.current_version
        cost = version.authoring_cost_usd
        return {
            "key": task.key,
            "environment": task.environment.name,
            "status": task.status,
            "version": version.number,
            "version_hash": version.content_hash,
            "domain": version.domain,
            "prompt": version.prompt,
            "answer": version.answer,
            "verifier": version.verifier,
            "metadata": version.metadata,
            "authoring_cost_usd": None if cost is None else self.fields["authoring_cost_usd"].quantize(cost),
            "difficulty": version.declared_difficulty,
            "calibration": self.get_calibration(task),
        }

    def get_calibration(self, task) -> dict | None:
        if task.attempts is None:
            return None
        return {
            "probe_model": self.context["probe_model"].name if self.context.get("probe_model") else None,
            "attempts": task.attempts,
            "successes": task.successes,
            "pass_rate": task.pass_rate,
            "interval": [task.interval_low, task.interval_high],
            "band": task.band,
            "band_predicted": task.predicted_probability is not None,
            "diagnosis": task.diagnosis or "",  # too_hard only, as on /api/v1/calibrations
            "grpo_signal": task.grpo_signal,
            "verifier_errors": task.verifier_errors,
            "flags": task.flags,
        }


def api_task_filter(params, *, in_body: bool = False) -> task_filters.TaskFilter:
    """The task filter (releases.task_filters) from API parameters: 400 naming the parameter for a
    wrong value, and for a name that does not exist 404 (in the URL) or 400 (`in_body`)."""
    try:
        return task_filters.task_filter_parse(params)
    except task_filters.TaskFilterError as error:
        if error.missing and not in_body:
            raise NotFound(str(error)) from None
        raise ValidationError({error.field: [error.reason]}) from None


class TaskFilters(serializers.Serializer):
    """Query parameters of GET /api/v1/tasks, for the schema; releases.task_filters parses them."""

    environment = serializers.CharField(required=False, help_text="Environment name.")
    domain = serializers.CharField(required=False, help_text="Domain of the current version (math, code...).")
    status = serializers.ChoiceField(choices=TaskStatus.values, required=False)
    band = serializers.ChoiceField(choices=Band.values, required=False, help_text="Band under the probe model.")
    diagnosis = serializers.ChoiceField(
        choices=Diagnosis.values,
        required=False,
        help_text="Why a too_hard task is too hard under the probe model: suspect_verifier, truncated or hard.",
    )
    model = serializers.CharField(required=False, help_text="Probe model name; default: the latest used.")
    pass_rate_min = serializers.FloatField(required=False, min_value=0, max_value=1)
    pass_rate_max = serializers.FloatField(required=False, min_value=0, max_value=1)
    flag = serializers.ChoiceField(
        choices=task_filters.FLAGS, required=False, help_text="A calibration flag, or audit_failed."
    )
    q = serializers.CharField(required=False, help_text="Text in the key or the prompt.")
    mine = serializers.BooleanField(required=False, help_text="Only the token owner's tasks.")
    updated_since = serializers.DateTimeField(required=False, help_text="ISO 8601; tasks changed at or after it.")
    contaminated = serializers.ChoiceField(
        choices=["true", "false"], required=False, help_text="Only (true) or no (false) tasks flagged contaminated."
    )
    near_duplicate = serializers.ChoiceField(
        choices=["true", "false"], required=False, help_text="Only (true) or no (false) tasks flagged near-duplicate."
    )


@extend_schema(
    parameters=[
        TaskFilters,
        OpenApiParameter(
            "Age",
            int,
            OpenApiParameter.HEADER,
            response=True,
            description="Where the server keeps pages (PASSBAND_API_PAGE_SECONDS): seconds since this page was read "
            "from the database. Send `Cache-Control: no-cache` to read afresh.",
        ),
    ]
)
@policy.api("api_task_list")
class TaskList(base.SharedPages, base.IdOrderedList):
    """GET /api/v1/tasks: tasks with their calibration under one probe model, filtered, in id order; a page
    may be up to PASSBAND_API_PAGE_SECONDS old (its Age header says how old)."""

    serializer_class = TaskSerializer

    @cached_property
    def task_filter(self) -> task_filters.TaskFilter:
        return api_task_filter(self.request.query_params)

    def get_queryset(self):
        tasks = task_filters.tasks_matching(user=self.request.user, task_filter=self.task_filter)
        # Only the columns a row shows: the environment's guidelines and fixtures, the version's tools and
        # audit findings, the owner are not decoded 100 times a page.
        return (
            tasks.filter(current_version__isnull=False)
            .select_related(None)
            .select_related("environment", "current_version")
            .only(*ROW_FIELDS)
        )

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "probe_model": self.task_filter.probe_model}
