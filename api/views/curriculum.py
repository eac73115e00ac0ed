"""GET /api/v1/curriculum: the next tasks for a trainer's checkpoint, drawn by predicted learning signal."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import TokenRateThrottle
from calibration import selectors
from calibration.models import ProbeModel
from curation import policy
from curation.models import Environment


class CurriculumQuery(serializers.Serializer):
    environment = serializers.CharField(help_text="Environment name.")
    n = serializers.IntegerField(min_value=1, max_value=1000, default=16, help_text="How many tasks to draw.")
    step = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        help_text="The checkpoint's training step: feedback for later checkpoints is ignored. Default: all.",
    )
    seed = serializers.IntegerField(
        min_value=0, max_value=2**63 - 1, default=0, help_text="The same seed and evidence draw the same tasks."
    )
    model = serializers.CharField(required=False, help_text="Probe model whose calibration is the oldest evidence.")
    group_size = serializers.IntegerField(min_value=2, max_value=1024, default=8, help_text="The trainer's GRPO group.")


class CurriculumTaskSerializer(serializers.Serializer):
    task = serializers.CharField(source="task.key")
    environment = serializers.CharField(source="task.environment.name")
    version = serializers.IntegerField(source="task.current_version.number")
    version_hash = serializers.CharField(source="task.current_version.content_hash")
    predicted_pass_rate = serializers.FloatField(source="estimate.pass_rate")
    signal = serializers.FloatField(
        source="estimate.signal", help_text="Expected probability that a group of group_size rollouts is mixed."
    )
    band = serializers.CharField(source="estimate.band", help_text="The band of the predicted pass rate.")
    checkpoints = serializers.IntegerField(help_text="Checkpoints with feedback up to step.")


class PoolForecastSerializer(serializers.Serializer):
    in_band_by_step = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="[step, tasks in band then] for the last reported checkpoints up to step.",
    )
    slope = serializers.FloatField(allow_null=True, help_text="Change in in-band tasks per training step.")
    empty_at_step = serializers.FloatField(
        allow_null=True, help_text="When the in-band pool runs out at that rate; null when it is not shrinking."
    )


class CurriculumResponse(serializers.Serializer):
    environment = serializers.CharField()
    step = serializers.IntegerField(allow_null=True)
    seed = serializers.IntegerField()
    candidates = serializers.IntegerField(help_text="Published tasks in the pool.")
    pool = serializers.DictField(child=serializers.IntegerField(), help_text="Candidates by predicted band.")
    tasks = CurriculumTaskSerializer(many=True)
    forecast = PoolForecastSerializer()


@policy.api("api_curriculum")
class CurriculumNext(APIView):
    """GET /api/v1/curriculum: draw the next `n` tasks for the checkpoint at `step`.

    Each published task you may see is weighted by its predicted learning signal under that
    checkpoint (the probability that a GRPO group of `group_size` is mixed), from the feedback you
    reported (POST /api/v1/feedback) and the probe model's calibration; the draw is without
    replacement and reproducible from `seed`. Tasks leave the pool when feedback retires them.
    """

    throttle_classes = [TokenRateThrottle]

    @extend_schema(parameters=[CurriculumQuery], responses={200: CurriculumResponse})
    def get(self, request):
        query = CurriculumQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        values = query.validated_data
        environment = Environment.objects.filter(name=values["environment"]).first()
        if environment is None:
            raise NotFound(f"no environment {values['environment']!r}.")
        probe_model = None
        if values.get("model"):
            probe_model = ProbeModel.objects.filter(name=values["model"]).first()
            if probe_model is None:
                raise NotFound(f"no probe model {values['model']!r}.")
        curriculum = selectors.curriculum_next(
            user=request.user,
            environment=environment,
            count=values["n"],
            seed=values["seed"],
            step=values.get("step"),
            probe_model=probe_model,
            group_size=values["group_size"],
        )
        body = {
            "environment": environment.name,
            "step": values.get("step"),
            "seed": values["seed"],
            "candidates": curriculum.candidates,
            "pool": curriculum.pool,
            "tasks": CurriculumTaskSerializer(curriculum.drawn, many=True).data,
            "forecast": {
                "in_band_by_step": [list(pair) for pair in curriculum.in_band_history],
                "slope": curriculum.forecast.slope,
                "empty_at_step": curriculum.forecast.empty_at_step,
            },
        }
        return Response(body)
