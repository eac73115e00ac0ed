"""REST API v1 for trainers: tasks with their calibration."""

from django.shortcuts import get_object_or_404
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated

from calibration.models import Band, ProbeModel
from curation import selectors
from curation.api_auth import scope_required
from curation.models import Environment


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


class TaskList(generics.ListAPIView):
    """GET /api/v1/tasks?environment=NAME&band=BAND&model=NAME: tasks with their calibration."""

    serializer_class = TaskSerializer
    permission_classes = [IsAuthenticated, scope_required("read")]

    def get_probe_model(self):
        if not hasattr(self, "_probe_model"):
            name = self.request.query_params.get("model")
            environment = self.get_environment()
            self._probe_model = (
                get_object_or_404(ProbeModel, name=name) if name else selectors.default_probe_model(environment)
            )
        return self._probe_model

    def get_environment(self):
        name = self.request.query_params.get("environment")
        return get_object_or_404(Environment, name=name) if name else None

    def get_queryset(self):
        band = self.request.query_params.get("band", "")
        if band and band not in Band.values:
            raise ValidationError({"band": f"Unknown band {band!r}; use one of {', '.join(Band.values)}."})
        tasks = selectors.tasks_with_calibration(
            user=self.request.user,
            environment=self.get_environment(),
            probe_model=self.get_probe_model(),
            band=band,
            status=self.request.query_params.get("status", ""),
        )
        return tasks.filter(current_version__isnull=False)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "probe_model": self.get_probe_model()}

    def paginate_queryset(self, queryset):
        # Cursor pagination needs one stable ordering field; the task id is it.
        self.paginator.ordering = "pk"
        return super().paginate_queryset(queryset.order_by("pk"))
