"""POST /api/v1/tasks/bulk: one status change for many tasks (submit, approve, reject, send back)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import scope_required
from accounts.errors import ServiceError
from calibration import selectors as calibration_selectors
from calibration.models import Band, ProbeModel
from curation import review_services
from curation.models import Environment, TaskStatus


class BulkRequest(serializers.Serializer):
    action = serializers.ChoiceField(choices=review_services.BULK_ACTIONS)
    environment = serializers.SlugRelatedField(slug_field="name", queryset=Environment.objects.all())
    keys = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        max_length=100_000,
        help_text="Only these task keys; without it, every task matching the filters.",
    )
    status = serializers.ChoiceField(choices=TaskStatus.values, required=False)
    band = serializers.ChoiceField(choices=Band.values, required=False)
    model = serializers.SlugRelatedField(
        slug_field="name",
        queryset=ProbeModel.objects.all(),
        required=False,
        help_text="The probe model `band` refers to.",
    )
    mine = serializers.BooleanField(required=False, default=False, help_text="Only the token owner's tasks.")
    comment = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Required to reject or send back."
    )

    def validate(self, data):
        if data["action"] in ("reject", "send_back") and not data["comment"].strip():
            raise serializers.ValidationError(
                {"comment": "Say why: a comment is required to reject or send back tasks."}
            )
        return data


class BulkResult(serializers.Serializer):
    action = serializers.CharField()
    changed = serializers.ListField(child=serializers.CharField(), help_text="Keys of the tasks that changed status.")
    skipped = serializers.ListField(
        child=serializers.CharField(), help_text="'key: reason' for each task left as it was."
    )


class TaskBulk(APIView):
    """Submit tasks for review (the token's user must be an author; own tasks) or decide them
    (a reviewer; never their own), all matching the filters or the listed keys. Each task changes in
    its own transaction and is audited; tasks that cannot change are listed with the reason."""

    permission_classes = [IsAuthenticated, scope_required("curate")]

    @extend_schema(request=BulkRequest, responses={200: BulkResult})
    def post(self, request):
        data = BulkRequest(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        environment = params["environment"]
        tasks = calibration_selectors.tasks_with_calibration(
            user=request.user,
            environment=environment,
            probe_model=params.get("model") or calibration_selectors.default_probe_model(environment),
            band=params.get("band", ""),
            status=params.get("status", ""),
            owner=request.user if params["mine"] else None,
        )
        if "keys" in params:
            tasks = tasks.filter(key__in=params["keys"])
        try:
            result = review_services.tasks_bulk_action(
                tasks=tasks, user=request.user, action=params["action"], comment=params["comment"]
            )
        except ServiceError as error:
            raise PermissionDenied(str(error)) from None
        return Response({"action": params["action"], "changed": result.decided, "skipped": result.skipped})
