"""POST /api/v1/repository-uploads: repository snapshots with the task rows that use them (multipart)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from curation import files, imports, policy, repo_uploads
from curation.models import Environment


class RepoUploadRequest(serializers.Serializer):
    environment = serializers.CharField(help_text="Environment name.")
    tasks = serializers.FileField(help_text="The task rows, JSON Lines; `verifier.snapshot` names a snapshot.")
    snapshots = serializers.ListField(
        child=serializers.FileField(),
        help_text="The repositories: .tar.gz (or .tgz) of the work tree, or git .bundle files.",
    )


class RepoUploadReport(serializers.Serializer):
    summary = serializers.CharField()
    report = serializers.DictField(help_text="The import report; each problem is [file, line, field, reason].")


@policy.api("api_repo_upload")
class RepoUpload(APIView):
    """Check the snapshots, resolve the rows' references, store the snapshots once by content hash and import
    the rows with their audits, all or nothing (docs/repository-tasks.md, "Uploading snapshots"). 201 with
    the report; 400 with every problem (file, line, field) when nothing was written; 503 when the storage
    refused a file."""

    parser_classes = [MultiPartParser]

    @extend_schema(request={"multipart/form-data": RepoUploadRequest}, responses={201: RepoUploadReport})
    def post(self, request):
        if not policy.is_author(request.user):
            raise PermissionDenied("Only authors upload tasks.")
        data = RepoUploadRequest(
            data={
                "environment": request.data.get("environment"),
                "tasks": request.FILES.get("tasks"),
                "snapshots": request.FILES.getlist("snapshots"),
            }
        )
        data.is_valid(raise_exception=True)
        params = data.validated_data
        environment = get_object_or_404(Environment, name=params["environment"])
        try:
            report = repo_uploads.repo_upload(
                environment=environment,
                owner=request.user,
                tasks_filename=params["tasks"].name,
                tasks_data=params["tasks"].read(),
                snapshot_uploads=repo_uploads.uploads_from_files(params["snapshots"]),
            )
        except imports.ImportRejected as rejected:
            body = {"summary": rejected.report.summary(), "report": rejected.report.as_dict()}
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        except files.StorageUnavailable as error:
            return Response({"detail": str(error)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response({"summary": report.summary(), "report": report.as_dict()}, status=status.HTTP_201_CREATED)
