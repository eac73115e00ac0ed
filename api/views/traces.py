"""A campaign's training traces over the API (releases/traces.py, engine/traces.py)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from calibration.models import Campaign
from curation import policy
from engine import traces
from releases import traces as trace_exports


@policy.api("api_campaign_traces")
class CampaignTraces(APIView):
    """GET /api/v1/campaigns/<id>/traces.<jsonl|parquet|atif>: the campaign's rollouts as training traces
    (token ids as sampled, loss mask, logprobs, policy, reward). `include_excluded=true` keeps rollouts
    that cannot be trained on (text_only capture, no reward), marked `trainable: false`."""

    @extend_schema(
        parameters=[
            OpenApiParameter("file_type", str, OpenApiParameter.PATH, enum=list(traces.TRACE_FILE_TYPES)),
            OpenApiParameter("include_excluded", bool, OpenApiParameter.QUERY),
        ],
        responses={(200, "application/octet-stream"): bytes},
    )
    def get(self, request, campaign_id: int, file_type: str):
        campaigns = Campaign.objects.select_related("probe_model")
        campaign = policy.get_for(request.user, policy.EXPORT, campaigns, pk=campaign_id)
        return trace_exports.campaign_traces_response(
            campaign=campaign,
            user=request.user,
            file_type=file_type,
            include_excluded=request.query_params.get("include_excluded") in ("1", "true"),
        )
