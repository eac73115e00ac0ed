"""POST /api/v1/tasks/bulk: one status change for many tasks (submit, approve, reject, send back)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.errors import ServiceError
from api.views.tasks import api_task_filter
from calibration.models import Band
from curation import policy
from curation.models import TaskStatus
from releases import task_filters
from review import services as review_services


class BulkRequest(serializers.Serializer):
    action = serializers.ChoiceField(choices=review_services.BULK_ACTIONS)
    environment = serializers.CharField(help_text="Environment name.")
    keys = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        max_length=100_000,
        help_text="Only these task keys; without it, every task matching the filters.",
    )
    # The filter, as GET /api/v1/tasks takes it; releases.task_filters parses it.
    status = serializers.ChoiceField(choices=TaskStatus.values, required=False)
    band = serializers.ChoiceField(choices=Band.values, required=False)
    model = serializers.CharField(required=False, help_text="The probe model `band` and `flag` refer to.")
    flag = serializers.ChoiceField(choices=task_filters.FLAGS, required=False)
    q = serializers.CharField(required=False, help_text="Text in the key or the prompt.")
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


@policy.api("api_task_bulk")
class TaskBulk(APIView):
    """Submit tasks for review (the token's user must be an author; own tasks) or decide them
    (a reviewer; never their own), all matching the filters or the listed keys. Each task changes in
    its own transaction and is audited; tasks that cannot change are listed with the reason."""

    @extend_schema(request=BulkRequest, responses={200: BulkResult})
    def post(self, request):
        data = BulkRequest(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        filters = {name: params[name] for name in task_filters.PARAMS if name in params}
        task_filter = api_task_filter(filters, in_body=True)
        if "keys" in params:
            task_filter = task_filters.with_keys(task_filter, params["keys"])
        tasks = task_filters.tasks_matching(user=request.user, task_filter=task_filter)
        try:
            result = review_services.tasks_bulk_action(
                tasks=tasks, user=request.user, action=params["action"], comment=params["comment"]
            )
        except ServiceError as error:
            raise PermissionDenied(str(error)) from None
        return Response({"action": params["action"], "changed": result.decided, "skipped": result.skipped})
