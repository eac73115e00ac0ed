"""GET /api/v1/tasks/<environment>/<key>/versions/<number>/quality-card: one task version's quality card
(engine/quality_card.py, docs/quality-card.md)."""

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from curation import policy
from curation.models import Task
from engine import quality_card
from releases.quality_cards import quality_card_of

# The OpenAPI view of the card: its top-level fields; the full JSON Schema is engine/quality_card.schema.json.
CARD_SCHEMA = {
    "type": "object",
    "description": f"A quality card, schema {quality_card.schema_id()} (docs/quality-card.md).",
    "properties": {
        name: {"type": "string" if name == "card_version" else ("array" if name == "calibrations" else "object")}
        for name in quality_card.schema()["required"]
    },
    "required": quality_card.schema()["required"],
}


@policy.api("api_quality_card")
class QualityCard(APIView):
    """The quality card of version `number` of a task the caller may see; 404 for a task they may not see or
    a version it does not have."""

    @extend_schema(responses={200: OpenApiResponse(response=CARD_SCHEMA, description="The quality card.")})
    def get(self, request, environment_name: str, key: str, number: int):
        tasks = Task.objects.select_related("environment")
        task = policy.get_for(request.user, policy.SEE, tasks, environment__name=environment_name, key=key)
        version = task.versions.filter(number=number).first()
        if version is None:
            raise Http404(f"{environment_name}/{key} has no version {number}.")
        return Response(quality_card_of(version=version))
