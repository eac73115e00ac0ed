"""POST /api/v1/verifier-test: the gameability audit of an environment's tasks, or of one verifier."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from curation import gameability, policy
from curation.models import Environment
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.gameability import fixtures_parse, gameability_check

# Above this many tasks the audit runs in `manage.py verifier_test`, not in one request.
MAX_TASKS_PER_REQUEST = 500


class VerifierTestRequest(serializers.Serializer):
    environment = serializers.CharField(
        required=False, help_text="Run the battery over this environment's tasks that you may see; stores each result."
    )
    tasks = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="With 'environment': only these task keys."
    )
    verifier = serializers.JSONField(required=False, help_text="Or: one verifier config, checked and not stored.")
    answer = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    prompt = serializers.JSONField(required=False, allow_null=True)
    fixtures = serializers.JSONField(
        required=False, help_text="With 'verifier': fixtures [{kind, completion, label?}] to run as well."
    )

    def validate(self, data):
        if bool(data.get("environment")) == bool(data.get("verifier")):
            raise serializers.ValidationError("Send either 'environment' or 'verifier', not both or neither.")
        return data


@policy.api("api_verifier_test")
class VerifierTest(APIView):
    """POST /api/v1/verifier-test: which tasks a degenerate completion earns reward on, with the completion."""

    @extend_schema(request=VerifierTestRequest, responses=dict)
    def post(self, request):
        body = VerifierTestRequest(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data.get("verifier"):
            return Response(_one_verifier(data))
        environment = Environment.objects.filter(name=data["environment"]).first()
        if environment is None:
            raise NotFound(f"No environment {data['environment']!r}.")
        tasks = policy.tasks_visible_to(request.user).filter(environment=environment, current_version__isnull=False)
        if data.get("tasks"):
            tasks = tasks.filter(key__in=data["tasks"])
        if tasks.count() > MAX_TASKS_PER_REQUEST:
            raise ValidationError(
                {"tasks": [f"More than {MAX_TASKS_PER_REQUEST} tasks: name some, or run manage.py verifier_test."]}
            )
        return Response(gameability.environment_gameability_check(environment=environment, tasks=tasks).as_dict())


def _one_verifier(data: dict) -> dict:
    try:
        fixtures = fixtures_parse(data.get("fixtures"), where="fixtures")
    except VerifierConfigError as error:
        raise ValidationError({"fixtures": [str(error)]}) from None
    try:
        findings = gameability_check(
            verifier=data["verifier"],
            answer=data.get("answer"),
            prompt=data.get("prompt"),
            fixtures=fixtures,
            tools=data.get("tools"),
        )
    except VerifierConfigError as error:
        raise ValidationError({"verifier": [str(error)]}) from None
    return {"gameable": bool(findings), "findings": [finding.as_dict() for finding in findings]}
