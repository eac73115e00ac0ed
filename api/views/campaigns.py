"""A campaign's progress over the API: the same count-and-cost query as its page (selectors.campaign_progress)."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from calibration import selectors
from calibration.models import Campaign
from curation import policy


class CampaignProgressSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Campaign.Status.values)
    environment = serializers.CharField()
    probe_model = serializers.CharField()
    items_total = serializers.IntegerField()
    items_done = serializers.IntegerField()
    items_dropped = serializers.IntegerField()
    stored = serializers.IntegerField(help_text="Rollouts stored, whatever their outcome.")
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    verifier_errors = serializers.IntegerField()
    generation_errors = serializers.IntegerField()
    unverified = serializers.IntegerField(help_text="Stored, waiting for the verifier (0 once cancelled).")
    discarded = serializers.IntegerField(help_text="Stored but never scored: the campaign was cancelled. Not billed.")
    cost_usd = serializers.FloatField(source="cost")
    rollouts_per_minute = serializers.FloatField(allow_null=True, help_text="Measured; null while unknown.")
    eta_seconds = serializers.FloatField(allow_null=True, help_text="At the measured rate; null while unknown.")
    eta_is_bound = serializers.BooleanField(
        help_text="eta_seconds is an upper bound: adaptive stopping with no task decided yet at a round ahead."
    )
    model_load_seconds = serializers.FloatField(allow_null=True)


@policy.api("api_campaign_detail")
class CampaignDetail(APIView):
    """GET /api/v1/campaigns/<id>: counts, cost and measured rate, as the campaign's page shows them."""

    @extend_schema(responses=CampaignProgressSerializer)
    def get(self, request, campaign_id: int):
        campaigns = Campaign.objects.select_related("environment", "probe_model")
        campaign = policy.get_for(request.user, policy.SEE, campaigns, pk=campaign_id)
        progress = selectors.campaign_progress(campaign=campaign)
        data = {
            **progress,
            "id": campaign.pk,
            "status": campaign.status,
            "environment": campaign.environment.name,
            "probe_model": campaign.probe_model.name,
            "model_load_seconds": campaign.model_load_seconds,
        }
        return Response(CampaignProgressSerializer(data).data)
