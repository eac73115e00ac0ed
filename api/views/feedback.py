"""POST /api/v1/feedback: pass rates trainers see during training; may retire tasks."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import FeedbackRateThrottle, TokenRateThrottle
from accounts.errors import ServiceError
from calibration import services
from curation import policy


class FeedbackItem(serializers.Serializer):
    task = serializers.CharField(help_text="Task key.")
    environment = serializers.CharField(required=False, help_text="Environment name, when a task key is ambiguous.")
    version = serializers.IntegerField(required=False, min_value=1, help_text="Task version number; default: current.")
    checkpoint = serializers.CharField(max_length=200, help_text="Policy checkpoint name.")
    step = serializers.IntegerField(
        min_value=0, max_value=2**63 - 1, help_text="Orders checkpoints: the training step."
    )
    attempts = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    passes = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    report_id = serializers.CharField(required=False, allow_blank=True, max_length=100, help_text="Makes retries safe.")

    def validate(self, data):
        if data["passes"] > data["attempts"]:
            raise serializers.ValidationError(
                {"passes": f"{data['passes']} passes cannot exceed {data['attempts']} attempts."}
            )
        return data


class FeedbackResult(serializers.Serializer):
    task = serializers.CharField()
    environment = serializers.CharField()
    version = serializers.IntegerField()
    checkpoints = serializers.IntegerField(help_text="Checkpoints reported for this task version.")
    latest_checkpoint = serializers.CharField()
    latest_step = serializers.IntegerField()
    pass_rate = serializers.FloatField(help_text="Posterior mean under the latest checkpoint, older ones discounted.")
    interval = serializers.ListField(child=serializers.FloatField())
    band = serializers.CharField()
    status = serializers.CharField()
    status_changed = serializers.BooleanField()
    duplicate = serializers.BooleanField(help_text="True when this report_id was stored before.")


@policy.api("api_feedback")
class Feedback(APIView):
    """POST /api/v1/feedback: a trainer's pass counts per task and policy checkpoint (one object or a list).

    Answers each task's discounted pass rate under the latest checkpoint, its band and status; a
    task whose band there is decided `retire` is retired automatically (audited).
    """

    throttle_classes = [TokenRateThrottle, FeedbackRateThrottle]
    MAX_ITEMS = 1000

    @extend_schema(request=FeedbackItem, responses={201: FeedbackResult, 200: FeedbackResult})
    def post(self, request):
        many = isinstance(request.data, list)
        if many and len(request.data) > self.MAX_ITEMS:
            raise ValidationError(f"Send at most {self.MAX_ITEMS} reports per request.")
        body = FeedbackItem(data=request.data, many=many)
        body.is_valid(raise_exception=True)
        items = body.validated_data if many else [body.validated_data]
        visible = policy.tasks_visible_to(request.user).filter(current_version__isnull=False)
        tasks = []
        for index, item in enumerate(items):
            matches = visible.filter(key=item["task"])
            if item.get("environment"):
                matches = matches.filter(environment__name=item["environment"])
            matches = list(matches.select_related("environment", "current_version")[:2])
            where = f"item {index}: " if many else ""
            if not matches:
                raise NotFound(f"{where}no task {item['task']!r} visible to you.")
            if len(matches) > 1:
                field = f"[{index}].environment" if many else "environment"
                ambiguous = f"key {item['task']!r} exists in several environments; add 'environment'."
                raise ValidationError({field: [ambiguous]})
            tasks.append(matches[0])
        results, created_any = [], False
        try:
            with transaction.atomic():
                for task, item in zip(tasks, items):
                    outcome = services.feedback_record(
                        task=task,
                        reported_by=request.user,
                        checkpoint=item["checkpoint"],
                        checkpoint_step=item["step"],
                        attempts=item["attempts"],
                        passes=item["passes"],
                        version_number=item.get("version"),
                        report_id=item.get("report_id", ""),
                        source=f"token {request.auth.prefix}… ({request.auth.name})",
                    )
                    created_any = created_any or outcome.created
                    drift = outcome.drift
                    results.append(
                        {
                            "task": task.key,
                            "environment": task.environment.name,
                            "version": outcome.report.task_version.number,
                            "checkpoints": drift.checkpoints,
                            "latest_checkpoint": drift.latest_checkpoint,
                            "latest_step": drift.latest_step,
                            "pass_rate": drift.pass_rate,
                            "interval": [drift.interval_low, drift.interval_high],
                            "band": drift.band,
                            "status": outcome.task_status,
                            "status_changed": outcome.status_changed,
                            "duplicate": not outcome.created,
                        }
                    )
        except ServiceError as error:
            raise ValidationError(str(error)) from None
        return Response(results if many else results[0], status=201 if created_any else 200)
