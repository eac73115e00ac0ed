from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from calibration import selectors, services
from calibration.models import Band, Campaign, ProbeModel
from calibration.selectors import default_probe_model
from curation import policy
from curation.models import Environment
from releases import selectors as release_selectors
from releases import traces as trace_exports
from web.templatetags.display import duration
from web.views import shared


@policy.page("dashboard")
def dashboard(request):
    environment_name = request.GET.get("environment", "")
    environment = Environment.objects.filter(name=environment_name).first() or Environment.objects.first()
    probe_model = ProbeModel.objects.filter(name=request.GET.get("model", "")).first()
    probe_model = probe_model or default_probe_model(environment)
    checkpoint = bool(environment and probe_model and probe_model.run)
    return render(
        request,
        "calibration/dashboard.html",
        {
            "environment": environment,
            "environments": Environment.objects.all(),
            "probe_model": probe_model,
            "probe_models": ProbeModel.objects.all(),
            "policy_in_use": selectors.campaign_policy_in_use(environment=environment) if environment else None,
            "too_hard_diagnoses": selectors.too_hard_by_diagnosis(
                user=request.user, environment=environment, probe_model=probe_model
            ),
            "checkpoints": (
                selectors.checkpoint_movement(environment=environment, run=probe_model.run) if checkpoint else None
            ),
            # The re-profile form's release picker, and where this checkpoint's latest re-profiles stand.
            "reprofile_releases": (
                release_selectors.releases_pinning(user=request.user, environment=environment) if checkpoint else []
            ),
            "reprofiles": (
                selectors.reprofiles_latest(environment=environment, probe_model=probe_model) if checkpoint else []
            ),
            "curriculum_sweep": (
                selectors.curriculum_sweep(environment=environment, probe_model=probe_model) if environment else []
            ),
            "campaigns": Campaign.objects.filter(environment=environment).select_related("environment", "probe_model")[
                :10
            ],
        },
    )


@policy.page("pass_rate_histogram_data")
def pass_rate_histogram_data(request):
    environment = get_object_or_404(Environment, name=request.GET.get("environment", ""))
    probe_model = ProbeModel.objects.filter(name=request.GET.get("model", "")).first()
    data = selectors.pass_rate_histogram(environment=environment, probe_model=probe_model)
    data["band_order"] = Band.values
    return JsonResponse(data)


@policy.page("campaign_list")
def campaign_list(request):
    """Every campaign, latest first, with its progress (one GROUP BY over the page's campaigns)."""
    status = request.GET.get("status", "")
    campaigns = Campaign.objects.select_related("environment", "probe_model", "created_by")
    if status in Campaign.Status.values:
        campaigns = campaigns.filter(status=status)
    shown, page, has_next = shared.page_of(request, campaigns.order_by("-created_at"), size=50)
    progress = {row["id"]: row for row in selectors.campaigns_progress_of(campaigns=shown)}
    rows = [{"campaign": campaign, "progress": progress.get(campaign.pk)} for campaign in shown]
    return render(
        request,
        "calibration/campaign_list.html",
        {
            "rows": rows,
            "status": status,
            "statuses": Campaign.Status.values,
            "page": page,
            "has_next": has_next,
            "query": shared.query_without(request, "page"),
        },
    )


@policy.page("campaign_detail")
def campaign_detail(request, campaign_id: int):
    campaigns = Campaign.objects.select_related("environment", "probe_model", "created_by")
    campaign = policy.get_for(request.user, policy.SEE, campaigns, pk=campaign_id)
    progress = selectors.campaign_progress(campaign=campaign)
    context = {
        "campaign": campaign,
        "progress": progress,
        "eta": _duration(progress["eta_seconds"]),
        "bands": selectors.campaign_band_table(campaign=campaign),
        "can_change": policy.allows(request.user, policy.CHANGE, campaign),
        "can_export": policy.allows(request.user, policy.EXPORT, campaign),
    }
    template = (
        "calibration/_campaign_progress.html"
        if request.headers.get("HX-Request")
        else "calibration/campaign_detail.html"
    )
    return render(request, template, context)


def _duration(seconds: float | None) -> str:
    """A rough, readable duration (the `duration` template filter)."""
    return duration(seconds)


@require_POST
@policy.page("campaign_control")
def campaign_control(request, campaign_id: int, action: str):
    campaign = policy.get_for(request.user, policy.CHANGE, Campaign.objects.all(), pk=campaign_id)
    status = {
        "pause": Campaign.Status.PAUSED,
        "resume": Campaign.Status.RUNNING,
        "cancel": Campaign.Status.CANCELLED,
    }.get(action)
    if status is None:
        raise Http404(f"Unknown campaign action {action!r}.")
    try:
        services.campaign_set_status(campaign=campaign, status=status)
    except ServiceError as error:
        messages.error(request, str(error))
    return redirect("campaign_detail", campaign_id=campaign.pk)


def _comparison_models(request):
    environment = get_object_or_404(Environment, name=request.GET.get("environment", ""))
    first = get_object_or_404(ProbeModel, name=request.GET.get("first", ""))
    second = get_object_or_404(ProbeModel, name=request.GET.get("second", ""))
    return environment, first, second


@policy.page("model_compare")
def model_compare(request):
    """Two probe models task by task: scatter of pass rates, rank correlation, band agreement."""
    environments = Environment.objects.all()
    probe_models = list(ProbeModel.objects.all())
    environment = environments.filter(name=request.GET.get("environment", "")).first() or environments.first()
    by_name = {model.name: model for model in probe_models}
    first = by_name.get(request.GET.get("first", "")) or (probe_models[0] if probe_models else None)
    second = by_name.get(request.GET.get("second", "")) or (probe_models[1] if len(probe_models) > 1 else first)
    return render(
        request,
        "calibration/model_compare.html",
        {
            "environment": environment,
            "environments": environments,
            "probe_models": probe_models,
            "first": first,
            "second": second,
            "costs": selectors.environment_costs(environment=environment) if environment else None,
        },
    )


@require_POST
@policy.page("probe_model_edit")
def probe_model_edit(request, name: str):
    """Staff change a probe model's temperature and default completion budget."""
    probe_model = policy.get_for(request.user, policy.CHANGE, ProbeModel.objects.all(), name=name)
    try:
        services.probe_model_update(
            probe_model=probe_model,
            max_new_tokens=int(request.POST.get("max_new_tokens", "")),
            temperature=float(request.POST.get("temperature", probe_model.temperature)),
        )
        messages.success(
            request,
            f"{probe_model.name}: max new tokens {probe_model.max_new_tokens}, temperature {probe_model.temperature}.",
        )
    except (ServiceError, ValueError) as error:
        messages.error(request, f"Could not change {probe_model.name}: {error}")
    return redirect("model_compare")


@policy.page("model_compare_data")
def model_compare_data(request):
    environment, first, second = _comparison_models(request)
    return JsonResponse(selectors.model_comparison(environment=environment, first=first, second=second))


@policy.page("environment_costs_data")
def environment_costs_data(request, environment_name: str):
    environment = policy.get_for(request.user, policy.SEE, Environment.objects.all(), name=environment_name)
    probe_model = ProbeModel.objects.filter(name=request.GET.get("model", "")).first()
    return JsonResponse(selectors.environment_costs(environment=environment, probe_model=probe_model))


@policy.page("campaign_traces")
def campaign_traces(request, campaign_id: int, file_type: str):
    """The campaign's training traces (JSONL, Parquet, or ATIF trajectories as JSON lines); only the
    trainable rollouts unless `?include_excluded=1`."""
    campaign = policy.get_for(
        request.user, policy.EXPORT, Campaign.objects.select_related("probe_model"), pk=campaign_id
    )
    return trace_exports.campaign_traces_response(
        campaign=campaign,
        user=request.user,
        file_type=file_type,
        include_excluded=request.GET.get("include_excluded") in ("1", "true"),
    )
