"""GET /api/v1/judges: how each LLM judge agrees with people's blind verdicts (docs/verifiers.md)."""

from dataclasses import asdict

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from curation import judge_master_keys, policy
from review import blind_reviews


class ProportionSerializer(serializers.Serializer):
    successes = serializers.IntegerField()
    n = serializers.IntegerField()
    estimate = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(help_text='Why there is no estimate ("not enough data: ..."); empty otherwise.')


class KappaSerializer(serializers.Serializer):
    n = serializers.IntegerField()
    observed = serializers.FloatField(allow_null=True, help_text="po: the share of items with the same verdict.")
    chance = serializers.FloatField(allow_null=True, help_text="pe: the agreement expected by chance.")
    estimate = serializers.FloatField(allow_null=True)
    standard_error = serializers.FloatField(allow_null=True, help_text="sqrt(po (1 - po) / (n (1 - pe)^2)).")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    reason = serializers.CharField()


class JudgeAgreementSerializer(serializers.Serializer):
    judge = serializers.CharField()
    prompt_version = serializers.CharField(allow_null=True, help_text="null: every prompt version of the judge pooled.")
    sampled = serializers.IntegerField(help_text="Judged rollouts drawn for blind review.")
    waiting = serializers.IntegerField(help_text="Of those, still without a reviewer's verdict.")
    n = serializers.IntegerField(help_text="Reviewed items: the sample size of every measure but the rates.")
    accuracy = ProportionSerializer(help_text="Share of items where the judge's verdict matched the reviewer's.")
    kappa = KappaSerializer()
    false_pass = ProportionSerializer(help_text="Of the items the judge passed, the share the reviewer failed.")
    false_fail = ProportionSerializer(help_text="Of the items the judge failed, the share the reviewer passed.")
    false_pass_limit = serializers.FloatField(help_text="PASSBAND_JUDGE_FALSE_PASS_LIMIT.")
    warning = serializers.CharField(help_text='"", "above" (the estimate is above the limit) or "clearly above".')


@policy.api("api_judge_agreement")
class JudgeAgreement(APIView):
    """GET /api/v1/judges: per judge and prompt version, then pooled per judge, the agreement of the
    judge's verdicts with reviewers' blind verdicts. Aggregates only: no item, verdict or rollout."""

    @extend_schema(responses={200: JudgeAgreementSerializer(many=True)})
    def get(self, request):
        limit = settings.PASSBAND_JUDGE_FALSE_PASS_LIMIT
        rows = [
            {
                "judge": row.decided_by,
                "prompt_version": row.decided_version or None,
                "sampled": row.sampled,
                "waiting": row.waiting,
                "n": row.measures.n,
                "accuracy": asdict(row.measures.agreement),
                "kappa": asdict(row.measures.kappa),
                "false_pass": asdict(row.measures.false_pass),
                "false_fail": asdict(row.measures.false_fail),
                "false_pass_limit": limit,
                "warning": row.warning,
            }
            for row in blind_reviews.decider_agreement(limit=limit)
        ]
        return Response(JudgeAgreementSerializer(rows, many=True).data)


class MasterKeysSerializer(serializers.Serializer):
    judge = serializers.CharField()
    model = serializers.CharField(help_text="The judge's model when the battery ran.")
    tasks = serializers.IntegerField(help_text="The judge's tasks attacked.")
    trials = serializers.IntegerField(help_text="Attacks answered with a pass or a fail.")
    false_passes = serializers.IntegerField()
    errors = serializers.IntegerField(help_text="Attacks answered without a verdict: not trials.")
    rate = serializers.FloatField(allow_null=True)
    upper_bound = serializers.FloatField(help_text="One-sided exact (Clopper-Pearson) upper bound of the rate.")
    level = serializers.FloatField()
    limit = serializers.FloatField(help_text="PASSBAND_JUDGE_FALSE_PASS_LIMIT when it ran.")
    may_score = serializers.BooleanField(help_text="Within the limit, or overridden by staff.")
    override_reason = serializers.CharField()
    created_at = serializers.DateTimeField()


@policy.api("api_judge_master_keys")
class JudgeMasterKeys(APIView):
    """GET /api/v1/judges/master-keys: each judge's latest master-key run (docs/verifiers.md, "Master keys"):
    counts, rate and bound, and whether it may score campaigns. Aggregates only: no completion or task."""

    @extend_schema(responses={200: MasterKeysSerializer(many=True)})
    def get(self, request):
        rows = [
            {
                **{field: getattr(run, field) for field in MasterKeysSerializer().fields if hasattr(run, field)},
                "may_score": not run.above_limit or run.override_at is not None,
            }
            for run in judge_master_keys.judge_latest_runs()
        ]
        return Response(MasterKeysSerializer(rows, many=True).data)
