"""GET /api/v1/tasks: tasks with their calibration under one probe model."""

from django.db.models import Exists, OuterRef
from django.shortcuts import get_object_or_404
from django.utils.functional import cached_property
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from api.views import base
from calibration import selectors as calibration_selectors
from calibration.models import Band, ProbeModel
from curation import policy
from curation.models import Environment, TaskStatus
from similarity import selectors as similarity_selectors


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
        source="current_version.authoring_cost_usd", max_digits=10, decimal_places=2, coerce_to_string=False
    )
    calibration = serializers.SerializerMethodField()

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
            "grpo_signal": task.grpo_signal,
            "verifier_errors": task.verifier_errors,
            "flags": task.flags,
        }


class TaskFilters(serializers.Serializer):
    """Query parameters of GET /api/v1/tasks; a bad value is answered 400 naming the parameter."""

    environment = serializers.CharField(required=False, help_text="Environment name.")
    domain = serializers.CharField(required=False, help_text="Domain of the current version (math, code...).")
    status = serializers.ChoiceField(choices=TaskStatus.values, required=False)
    band = serializers.ChoiceField(choices=Band.values, required=False, help_text="Band under the probe model.")
    model = serializers.CharField(required=False, help_text="Probe model name; default: the latest used.")
    pass_rate_min = serializers.FloatField(required=False, min_value=0, max_value=1)
    pass_rate_max = serializers.FloatField(required=False, min_value=0, max_value=1)
    flag = serializers.CharField(required=False, help_text="Only tasks whose calibration carries this flag.")
    updated_since = serializers.DateTimeField(required=False, help_text="ISO 8601; tasks changed at or after it.")
    contaminated = serializers.ChoiceField(
        choices=["true", "false"], required=False, help_text="Only (true) or no (false) tasks flagged contaminated."
    )
    near_duplicate = serializers.ChoiceField(
        choices=["true", "false"], required=False, help_text="Only (true) or no (false) tasks flagged near-duplicate."
    )


@extend_schema(parameters=[TaskFilters])
@policy.api("api_task_list")
class TaskList(base.IdOrderedList):
    """GET /api/v1/tasks: tasks with their calibration under one probe model, filtered, in id order."""

    serializer_class = TaskSerializer

    @cached_property
    def filters(self) -> dict:
        parsed = TaskFilters(data=self.request.query_params)
        parsed.is_valid(raise_exception=True)
        return parsed.validated_data

    @cached_property
    def environment(self) -> Environment | None:
        name = self.filters.get("environment")
        return get_object_or_404(Environment, name=name) if name else None

    @cached_property
    def probe_model(self) -> ProbeModel | None:
        name = self.filters.get("model")
        return (
            get_object_or_404(ProbeModel, name=name)
            if name
            else calibration_selectors.default_probe_model(self.environment)
        )

    def get_queryset(self):
        filters = self.filters
        tasks = calibration_selectors.tasks_with_calibration(
            user=self.request.user,
            environment=self.environment,
            probe_model=self.probe_model,
            band=filters.get("band", ""),
            status=filters.get("status", ""),
        ).filter(current_version__isnull=False)
        if filters.get("domain"):
            tasks = tasks.filter(current_version__domain=filters["domain"])
        if filters.get("pass_rate_min") is not None:
            tasks = tasks.filter(pass_rate__gte=filters["pass_rate_min"])
        if filters.get("pass_rate_max") is not None:
            tasks = tasks.filter(pass_rate__lte=filters["pass_rate_max"])
        if filters.get("updated_since"):
            tasks = tasks.filter(updated_at__gte=filters["updated_since"])
        for kind in similarity_selectors.FLAG_KINDS:
            if filters.get(kind):
                tasks = similarity_selectors.tasks_filter_flag(tasks, kind=kind, present=filters[kind] == "true")
        if filters.get("flag"):
            flagged = calibration_selectors.calibrations_flagged(filters["flag"]).filter(
                task_version=OuterRef("current_version")
            )
            if self.probe_model is not None:
                flagged = flagged.filter(probe_model=self.probe_model)
            tasks = tasks.filter(Exists(flagged))
        return tasks

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "probe_model": self.probe_model}
