"""Checkpoint re-profiles over the API: start one for an environment and checkpoint, read its state.

The same rule as the dashboard's "Re-profile for …" button (curation.policy: probing an environment
is for authors and staff), behind a token with the `curate` scope. docs/prediction.md describes the
re-profile itself."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.errors import ServiceError
from api.views import base
from calibration import selectors, services
from calibration.models import Campaign, ProbeModel, Reprofile
from curation import policy
from curation.models import Environment
from releases import selectors as release_selectors
from releases.errors import ReleaseError


class ReprofileRequest(serializers.Serializer):
    environment = serializers.CharField(help_text="Environment name.")
    probe_model = serializers.CharField(
        help_text="The new checkpoint: a probe model with a run and a checkpoint step, after earlier ones."
    )
    sample = serializers.IntegerField(
        min_value=1,
        default=50,
        help_text="Tasks the checkpoint probes before the bands are predicted; they also test the model "
        "(model_check) before any band is kept, which takes at least 10 (fewer: every task is probed).",
    )
    level = serializers.FloatField(
        min_value=0.5,
        max_value=0.999,
        default=0.95,
        help_text="Tasks whose predicted band is less probable are probed.",
    )
    rollouts = serializers.IntegerField(min_value=1, max_value=4096, default=72, help_text="Adaptive cap per task.")
    seed = serializers.IntegerField(min_value=0, max_value=2**62, required=False, allow_null=True, default=None)
    release = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Re-profile only the task versions this release pins (those of the environment); default: the "
        "environment's current tasks.",
    )


class ReprofileCampaignSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Campaign.Status.values)
    finished_at = serializers.DateTimeField(allow_null=True)


class ReprofileSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    environment = serializers.CharField(source="environment.name")
    probe_model = serializers.CharField(source="probe_model.name")
    run = serializers.CharField(source="probe_model.run")
    stage = serializers.ChoiceField(
        choices=Reprofile.Stage.values,
        help_text="sample: a campaign probes a sample (the next step starts by itself when it is done); "
        "reprofile: bands predicted, the uncertain tasks sent to `reprofile_campaign` (null: none were).",
    )
    finished = serializers.SerializerMethodField(
        help_text="The second step was taken and its campaign (if any) is no longer running or paused."
    )
    tasks = serializers.IntegerField(help_text="Tasks in scope.")
    release = serializers.IntegerField(
        source="release_id",
        allow_null=True,
        help_text="The release whose task versions (those of the environment) are re-profiled; null: the "
        "environment's current tasks.",
    )
    predicted = serializers.IntegerField(help_text="Bands predicted (calibrations marked predicted, no rollouts).")
    probed = serializers.IntegerField(
        help_text="Tasks sent to the current stage's campaign: the sample's, then the uncertain ones."
    )
    ability = serializers.FloatField(allow_null=True, help_text="The checkpoint's fitted ability (logits).")
    ability_sd = serializers.FloatField(allow_null=True)
    sample = serializers.IntegerField()
    level = serializers.FloatField()
    rollouts = serializers.IntegerField()
    seed = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(help_text="Why a worker could not take the next step; empty otherwise.")
    model_check = serializers.JSONField(
        allow_null=True,
        help_text="The sample's test of the item-response model: checked, worst_z, critical_z, outliers, trusted. "
        "Not trusted: no band was predicted and every task was probed.",
    )
    sample_campaign = ReprofileCampaignSerializer(allow_null=True)
    reprofile_campaign = ReprofileCampaignSerializer(allow_null=True)
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_finished(self, reprofile) -> bool:
        campaign = reprofile.reprofile_campaign
        return reprofile.stage == Reprofile.Stage.REPROFILE and (
            campaign is None or campaign.status not in (Campaign.Status.RUNNING, Campaign.Status.PAUSED)
        )


class ReprofileFilters(serializers.Serializer):
    environment = serializers.CharField(required=False, help_text="Environment name.")
    probe_model = serializers.CharField(required=False, help_text="The checkpoint's probe model name.")


def _reprofiles():
    return Reprofile.objects.select_related(
        "environment", "probe_model", "created_by", "sample_campaign", "reprofile_campaign"
    )


@extend_schema(parameters=[ReprofileFilters])
@policy.api("api_reprofile_list")
class ReprofileList(base.LookupFilteredList):
    """GET /api/v1/reprofiles: checkpoint re-profiles, newest first, by environment and probe model.
    POST /api/v1/reprofiles: re-profile an environment for a checkpoint (authors and staff)."""

    serializer_class = ReprofileSerializer
    ordering = "-pk"
    filters_class = ReprofileFilters
    lookups = {"environment": "environment__name", "probe_model": "probe_model__name"}

    def base_queryset(self):
        return _reprofiles()

    @extend_schema(request=ReprofileRequest, responses={200: ReprofileSerializer, 201: ReprofileSerializer})
    def post(self, request):
        """Start a re-profile: 201 with the new one (its sample campaign, or its second step at once when
        the checkpoint has probed enough tasks already); 200 with the one in progress when the
        environment already has one for this checkpoint (nothing new is started); 400 when the model is
        no checkpoint with an earlier one that probed these tasks, or another campaign of it still runs."""
        body = ReprofileRequest(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        environment = policy.get_for(request.user, policy.PROBE, Environment.objects.all(), name=data["environment"])
        probe_model = ProbeModel.objects.filter(name=data["probe_model"]).first()
        if probe_model is None:
            raise ValidationError({"probe_model": [f"No probe model named {data['probe_model']!r}."]})
        task_versions = None
        if data["release"] is not None:
            try:
                task_versions = release_selectors.release_environment_versions(
                    user=request.user, release_id=data["release"], environment=environment
                )
            except ReleaseError as error:
                raise ValidationError({"release": [str(error)]}) from None
        existing = selectors.reprofile_in_progress(environment=environment, probe_model=probe_model)
        if existing is not None:
            return self._answer(existing, status.HTTP_200_OK)
        try:
            reprofile = services.checkpoint_reprofile(
                environment=environment,
                probe_model=probe_model,
                created_by=request.user,
                task_versions=task_versions,
                release_id=data["release"],
                sample=data["sample"],
                level=data["level"],
                rollouts=data["rollouts"],
                seed=data["seed"],
            )
        except ServiceError as error:
            existing = selectors.reprofile_in_progress(environment=environment, probe_model=probe_model)
            if existing is not None:  # a start at the same moment won
                return self._answer(existing, status.HTTP_200_OK)
            raise ValidationError({"detail": str(error)}) from None
        return self._answer(_reprofiles().get(pk=reprofile.pk), status.HTTP_201_CREATED)

    def _answer(self, reprofile: Reprofile, code: int) -> Response:
        return Response(
            ReprofileSerializer(reprofile).data, status=code, headers={"Location": f"/api/v1/reprofiles/{reprofile.pk}"}
        )


@policy.api("api_reprofile_detail")
class ReprofileDetail(APIView):
    """GET /api/v1/reprofiles/{id}: one re-profile's stage, counts and campaigns."""

    @extend_schema(responses=ReprofileSerializer)
    def get(self, request, reprofile_id: int):
        reprofile = policy.get_for(request.user, policy.SEE, _reprofiles(), pk=reprofile_id)
        return Response(ReprofileSerializer(reprofile).data)
