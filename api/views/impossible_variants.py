"""GET /api/v1/environments/<name>/impossible-variants: the verifier's false-pass rate under the policy."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from calibration import selectors
from curation import policy
from curation.models import Environment


class FoundHackSerializer(serializers.Serializer):
    task = serializers.CharField()
    version = serializers.IntegerField()
    verifier_kind = serializers.CharField()
    change = serializers.CharField(help_text="What the variant changed (its reference, a test, the state).")
    rollouts = serializers.ListField(child=serializers.IntegerField(), help_text="Variant rollouts that passed.")


class BrokenVariantSerializer(serializers.Serializer):
    task = serializers.CharField()
    version = serializers.IntegerField()
    reason = serializers.CharField(help_text="Why it was not probed (the reference or the empty answer passes it).")


class FalsePassSerializer(serializers.Serializer):
    probe_model = serializers.CharField()
    run = serializers.CharField(allow_null=True)
    checkpoint_step = serializers.IntegerField(allow_null=True)
    pass_rate = serializers.FloatField(allow_null=True, help_text="The environment's pass rate under this model.")
    trials = serializers.IntegerField(help_text="Attempts on ready variants graded pass or fail.")
    false_passes = serializers.IntegerField()
    false_pass_rate = serializers.FloatField(allow_null=True)
    upper_bound = serializers.FloatField(
        allow_null=True, help_text="One-sided exact (Clopper-Pearson) upper bound at `level`, also when none passed."
    )
    level = serializers.FloatField()
    variants = serializers.IntegerField(help_text="Ready variants probed.")
    broken_variants = serializers.IntegerField()
    not_derivable = serializers.IntegerField()
    found_hacks = FoundHackSerializer(many=True)
    broken = BrokenVariantSerializer(many=True)


@policy.api("api_environment_impossible_variants")
class EnvironmentImpossibleVariants(APIView):
    """Per probe model and checkpoint: the environment's pass rate beside its verifier's false-pass rate on
    impossible variants, with its upper bound, the found hacks and the broken variants (tasks the token's
    user may see)."""

    @extend_schema(responses={200: FalsePassSerializer(many=True)})
    def get(self, request, environment_name: str):
        environment = policy.get_for(request.user, policy.SEE, Environment.objects.all(), name=environment_name)
        rows = selectors.false_pass_rates(environment=environment, user=request.user)
        return Response(FalsePassSerializer(rows, many=True).data)
