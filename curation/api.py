"""REST API v1 for trainers: tasks with their calibration, and releases in every trainer's format."""

from django.db.models import Exists, OuterRef
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.utils.functional import cached_property
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from calibration.models import Band, Calibration, Outcome, ProbeModel, Rollout
from curation import releases, selectors
from curation.api_auth import scope_required
from curation.errors import CurationError
from curation.models import Environment, Release, ReleaseStatus, TaskStatus
from engine import formats, packing


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes `Authorization: Bearer pb_...` in the OpenAPI schema (registered on import)."""

    target_class = "curation.api_auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A Passband API token with the needed scope."}


class IdOrderedList(generics.ListAPIView):
    """A list with cursor pagination, which needs one stable ordering field: the id."""

    ordering = "pk"

    def paginate_queryset(self, queryset):
        self.paginator.ordering = self.ordering
        return super().paginate_queryset(queryset.order_by(self.ordering))


class LookupFilteredList(IdOrderedList):
    """A list whose query parameters (checked by `filters_class`) map one to one onto field lookups."""

    filters_class: type[serializers.Serializer]
    lookups: dict[str, str]

    def base_queryset(self):
        raise NotImplementedError

    def get_queryset(self):
        parsed = self.filters_class(data=self.request.query_params)
        parsed.is_valid(raise_exception=True)
        queryset = self.base_queryset()
        for name, lookup in self.lookups.items():
            if parsed.validated_data.get(name):
                queryset = queryset.filter(**{lookup: parsed.validated_data[name]})
        return queryset


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


@extend_schema(parameters=[TaskFilters])
class TaskList(IdOrderedList):
    """GET /api/v1/tasks: tasks with their calibration under one probe model, filtered, in id order."""

    serializer_class = TaskSerializer
    permission_classes = [IsAuthenticated, scope_required("read")]

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
        return get_object_or_404(ProbeModel, name=name) if name else selectors.default_probe_model(self.environment)

    def get_queryset(self):
        filters = self.filters
        tasks = selectors.tasks_with_calibration(
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
        if filters.get("flag"):
            flagged = Calibration.objects.filter(task_version=OuterRef("current_version"), flags__contains=[filters["flag"]])
            if self.probe_model is not None:
                flagged = flagged.filter(probe_model=self.probe_model)
            tasks = tasks.filter(Exists(flagged))
        return tasks

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "probe_model": self.probe_model}


class CalibrationSerializer(serializers.Serializer):
    task = serializers.CharField(source="task_version.task.key")
    environment = serializers.CharField(source="task_version.task.environment.name")
    version = serializers.IntegerField(source="task_version.number")
    version_hash = serializers.CharField(source="task_version.content_hash")
    probe_model = serializers.CharField(source="probe_model.name")
    attempts = serializers.IntegerField()
    successes = serializers.IntegerField()
    verifier_errors = serializers.IntegerField()
    pass_rate = serializers.FloatField(allow_null=True)
    interval = serializers.SerializerMethodField()
    band = serializers.CharField()
    decided = serializers.BooleanField()
    grpo_signal = serializers.FloatField(allow_null=True)
    flags = serializers.JSONField()
    updated_at = serializers.DateTimeField()

    def get_interval(self, calibration) -> list[float | None]:
        return [calibration.interval_low, calibration.interval_high]


class CalibrationFilters(serializers.Serializer):
    environment = serializers.CharField(required=False)
    model = serializers.CharField(required=False, help_text="Probe model name.")
    band = serializers.ChoiceField(choices=Band.values, required=False)
    task = serializers.CharField(required=False, help_text="Task key.")
    updated_since = serializers.DateTimeField(required=False)


@extend_schema(parameters=[CalibrationFilters])
class CalibrationList(LookupFilteredList):
    """GET /api/v1/calibrations: every (task version, probe model) calibration you may see, in id order."""

    serializer_class = CalibrationSerializer
    permission_classes = [IsAuthenticated, scope_required("read")]

    filters_class = CalibrationFilters
    lookups = {"environment": "task_version__task__environment__name", "model": "probe_model__name",
               "band": "band", "task": "task_version__task__key", "updated_since": "updated_at__gte"}

    def base_queryset(self):
        return Calibration.objects.select_related("task_version__task__environment", "probe_model").filter(
            task_version__task__in=selectors.tasks_visible_to(self.request.user).values("pk")
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
    outcome = serializers.CharField(allow_null=True)
    reward = serializers.FloatField(allow_null=True)
    detail = serializers.CharField()
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
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
class RolloutList(LookupFilteredList):
    """GET /api/v1/rollouts: attempts with their token ids and logprobs, for offline analysis, in id order."""

    serializer_class = RolloutSerializer
    permission_classes = [IsAuthenticated, scope_required("read")]

    filters_class = RolloutFilters
    lookups = {"environment": "task_version__task__environment__name", "task": "task_version__task__key",
               "model": "probe_model__name", "campaign": "campaign_id", "outcome": "outcome"}

    def base_queryset(self):
        return Rollout.objects.select_related("task_version__task__environment", "probe_model").filter(
            task_version__task__in=selectors.tasks_visible_to(self.request.user).values("pk")
        )


class ReleaseRequest(serializers.Serializer):
    probe_model = serializers.CharField(help_text="Name of the probe model whose calibration selects and annotates tasks.")
    environment = serializers.CharField(required=False, allow_blank=True, help_text="Environment name; default: all.")
    band = serializers.ChoiceField(choices=Band.values, default=Band.IN_BAND)
    status = serializers.ChoiceField(choices=TaskStatus.values, default=TaskStatus.APPROVED)
    domain = serializers.CharField(required=False, allow_blank=True, default="")


class ReleaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=ReleaseStatus.values)
    probe_model = serializers.CharField(source="probe_model.name")
    filter = serializers.JSONField()
    thresholds = serializers.JSONField()
    manifest = serializers.JSONField()
    error = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    built_at = serializers.DateTimeField(allow_null=True)
    files = serializers.SerializerMethodField()

    def get_files(self, release) -> dict[str, str]:
        if release.status != ReleaseStatus.READY:
            return {}
        request = self.context["request"]
        return {
            f"{format}.{file_type}": request.build_absolute_uri(
                f"/api/v1/releases/{release.pk}/files/{format}.{file_type}"
            )
            for format in formats.FORMATS
            for file_type in formats.FILE_TYPES
        }


def release_for(request, release_id: int) -> Release:
    """A release its creator, staff, reviewers and trainers may see; 404 for anyone else."""
    visible = Release.objects.select_related("probe_model", "created_by")
    if not selectors.user_can_see_all_tasks(request.user):
        visible = visible.filter(created_by=request.user)
    return get_object_or_404(visible, pk=release_id)


class ReleaseCreate(IdOrderedList):
    """GET /api/v1/releases: the releases you may see, newest first.
    POST /api/v1/releases: pin the matching task versions; the files are built in the background."""

    serializer_class = ReleaseSerializer
    permission_classes = [IsAuthenticated, scope_required("export")]
    ordering = "-pk"

    def get_queryset(self):
        visible = Release.objects.select_related("probe_model", "created_by")
        if not selectors.user_can_see_all_tasks(self.request.user):
            visible = visible.filter(created_by=self.request.user)
        return visible

    @extend_schema(request=ReleaseRequest, responses={202: ReleaseSerializer})
    def post(self, request):
        body = ReleaseRequest(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        probe_model = ProbeModel.objects.filter(name=data["probe_model"]).first()
        if probe_model is None:
            raise ValidationError({"probe_model": [f"No probe model named {data['probe_model']!r}."]})
        environment = None
        if data.get("environment"):
            environment = Environment.objects.filter(name=data["environment"]).first()
            if environment is None:
                raise ValidationError({"environment": [f"No environment named {data['environment']!r}."]})
        try:
            release = releases.release_create(
                user=request.user, probe_model=probe_model, environment=environment,
                band=data["band"], status=data["status"], domain=data.get("domain", ""),
            )
        except CurationError as error:
            raise ValidationError({"detail": str(error)}) from None
        body = ReleaseSerializer(release, context={"request": request}).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/v1/releases/{release.pk}"})


class ReleaseDetail(APIView):
    """GET /api/v1/releases/<id>: status, manifest and (when ready) file links."""

    permission_classes = [IsAuthenticated, scope_required("export")]

    @extend_schema(responses=ReleaseSerializer)
    def get(self, request, release_id: int):
        release = release_for(request, release_id)
        return Response(ReleaseSerializer(release, context={"request": request}).data)


class ReleaseFile(APIView):
    """GET /api/v1/releases/<id>/files/<format>.<jsonl|parquet>: one built file of a ready release."""

    permission_classes = [IsAuthenticated, scope_required("export")]

    @extend_schema(
        parameters=[
            OpenApiParameter("export_format", str, OpenApiParameter.PATH, enum=list(formats.FORMATS)),
            OpenApiParameter("file_type", str, OpenApiParameter.PATH, enum=list(formats.FILE_TYPES)),
        ],
        responses={(200, "application/octet-stream"): bytes},
    )
    def get(self, request, release_id: int, export_format: str, file_type: str):
        # Not `format`: DRF reserves that URL keyword for choosing a renderer.
        format = export_format
        release = release_for(request, release_id)
        if format not in formats.FORMATS or file_type not in formats.FILE_TYPES:
            raise Http404(f"No file {format}.{file_type}; formats: {', '.join(formats.FORMATS)}; types: jsonl, parquet.")
        if release.status != ReleaseStatus.READY:
            return Response({"detail": f"Release {release.pk} is {release.status}, not ready."}, status=409)
        path = releases.release_file_path(release=release, format=format, file_type=file_type)
        if not path.exists():
            raise Http404(f"Release {release.pk} has no file {path.name} on this server.")
        content_type = "application/x-ndjson" if file_type == "jsonl" else "application/vnd.apache.parquet"
        response = FileResponse(open(path, "rb"), as_attachment=True, filename=f"release-{release.pk}-{path.name}",
                                content_type=content_type)
        response["X-Checksum-SHA256"] = release.manifest.get("files", {}).get(path.name, {}).get("sha256", "")
        return response
