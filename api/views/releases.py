"""Releases over the API: create one, read its manifest, download its files."""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.errors import ServiceError
from api.errors import Conflict
from api.views import base
from calibration.models import Band, ProbeModel
from curation import policy
from curation.models import Environment, TaskStatus
from engine import formats
from releases import downloads
from releases import selectors as release_selectors
from releases import services as releases
from releases.models import Release, ReleaseStatus


class ReleaseRequest(serializers.Serializer):
    probe_model = serializers.CharField(
        help_text="Name of the probe model whose calibration selects and annotates tasks."
    )
    environment = serializers.CharField(required=False, allow_blank=True, help_text="Environment name; default: all.")
    band = serializers.ChoiceField(choices=Band.values, default=Band.IN_BAND)
    status = serializers.ChoiceField(choices=TaskStatus.values, default=TaskStatus.APPROVED)
    domain = serializers.CharField(required=False, allow_blank=True, default="")
    exclude_contaminated = serializers.BooleanField(
        default=False,
        help_text="Leave out tasks flagged as contaminated (a public benchmark item); default: keep them.",
    )
    include_thin_evidence = serializers.BooleanField(
        default=False,
        help_text="Keep tasks whose attempts are too few for their band (the stopping rule does not decide it); "
        "default: leave them out. The manifest warns about them either way.",
    )
    allow_empty = serializers.BooleanField(
        default=False, help_text="Build a release even when no task matches (its files hold no rows); default: refuse."
    )


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
    warnings = serializers.SerializerMethodField()

    def get_warnings(self, release) -> list[str]:
        return list(release.manifest.get("warnings", [])) if release.manifest else []

    def get_files(self, release) -> dict[str, str]:
        if release.status != ReleaseStatus.READY:
            return {}
        request = self.context["request"]
        return {
            f"{format}.{file_type}": request.build_absolute_uri(
                f"/api/v1/releases/{release.pk}/files/{format}.{file_type}"
            )
            for format in formats.names()
            for file_type in formats.FILE_TYPES
        }


def release_for(request, release_id: int, action: str = policy.SEE) -> Release:
    """The release in the URL if the user may `action` it (curation.policy: 404 unseen, 403 refused)."""
    releases = Release.objects.select_related("probe_model", "created_by")
    return policy.get_for(request.user, action, releases, pk=release_id)


@policy.api("api_release_create")
class ReleaseCreate(base.IdOrderedList):
    """GET /api/v1/releases: the releases you may see, newest first.
    POST /api/v1/releases: pin the matching task versions; the files are built in the background."""

    serializer_class = ReleaseSerializer
    ordering = "-pk"

    def get_queryset(self):
        return release_selectors.releases_visible_to(self.request.user)

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
                user=request.user,
                probe_model=probe_model,
                environment=environment,
                band=data["band"],
                status=data["status"],
                domain=data.get("domain", ""),
                allow_empty=data["allow_empty"],
                exclude_contaminated=data["exclude_contaminated"],
                include_thin_evidence=data["include_thin_evidence"],
            )
        except ServiceError as error:
            raise ValidationError({"detail": str(error)}) from None
        body = ReleaseSerializer(release, context={"request": request}).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/v1/releases/{release.pk}"})


@policy.api("api_release_detail")
class ReleaseDetail(APIView):
    """GET /api/v1/releases/<id>: status, manifest and (when ready) file links."""

    @extend_schema(responses=ReleaseSerializer)
    def get(self, request, release_id: int):
        release = release_for(request, release_id)
        return Response(ReleaseSerializer(release, context={"request": request}).data)


@policy.api("api_release_retry")
class ReleaseRetry(APIView):
    """POST /api/v1/releases/<id>/retry: build a failed release again."""

    @extend_schema(request=None, responses={202: ReleaseSerializer})
    def post(self, request, release_id: int):
        release = release_for(request, release_id, policy.CHANGE)
        try:
            release = releases.release_retry(release=release)
        except ServiceError as error:
            raise Conflict(str(error)) from None
        return Response(ReleaseSerializer(release, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


@policy.api("api_release_file")
class ReleaseFile(APIView):
    """GET /api/v1/releases/<id>/files/<format>.<jsonl|parquet>: one built file of a ready release."""

    @extend_schema(
        parameters=[
            OpenApiParameter("export_format", str, OpenApiParameter.PATH, enum=list(formats.names())),
            OpenApiParameter("file_type", str, OpenApiParameter.PATH, enum=list(formats.FILE_TYPES)),
        ],
        responses={(200, "application/octet-stream"): bytes},
    )
    def get(self, request, release_id: int, export_format: str, file_type: str):
        # Not `format`: DRF reserves that URL keyword for choosing a renderer.
        format = export_format
        release = release_for(request, release_id, policy.EXPORT)
        if format not in formats.names() or file_type not in formats.FILE_TYPES:
            raise Http404(
                f"No file {format}.{file_type}; formats: {', '.join(formats.names())}; types: jsonl, parquet."
            )
        if release.status != ReleaseStatus.READY:
            raise Conflict(f"Release {release.pk} is {release.status}, not ready.")
        return downloads.release_file_response(release=release, format=format, file_type=file_type)


@policy.api("api_release_diff")
class ReleaseDiff(APIView):
    """GET /api/v1/releases/<id>/diff?against=<other id>: tasks added, removed and changed (version or
    band) from release `against` to this one; each row gives both versions and bands."""

    @extend_schema(
        parameters=[OpenApiParameter("against", int, required=True, description="The release to compare with.")],
        responses={200: dict},
    )
    def get(self, request, release_id: int):
        new = release_for(request, release_id)
        against = request.query_params.get("against", "")
        if not against.isdigit():
            raise ValidationError({"against": "Give the id of the release to compare with, as ?against=<id>."})
        old = release_for(request, int(against))
        return Response(release_selectors.release_diff(old=old, new=new).as_dict())
