"""JSON endpoints behind the dashboard charts: parse the filter, call one selector, return JSON."""

from django.http import JsonResponse
from django.shortcuts import get_object_or_404

from calibration import selectors
from calibration.models import Band, ProbeModel
from curation import policy
from curation.models import Environment


def _filters(request) -> dict:
    return {
        "environment": Environment.objects.filter(name=request.GET.get("environment", "")).first(),
        "probe_model": ProbeModel.objects.filter(name=request.GET.get("model", "")).first(),
    }


def _bounded(request, name: str, default: int, most: int) -> int:
    value = request.GET.get(name, "")
    return min(max(int(value), 1), most) if value.isdigit() else default


@policy.page("bands_over_time_data")
def bands_over_time_data(request):
    data = selectors.bands_over_time(**_filters(request), days=_bounded(request, "days", 90, 730))
    data["band_order"] = Band.values
    return JsonResponse(data)


@policy.page("cost_data")
def cost_data(request):
    data = selectors.cost_summary(**_filters(request))
    data["band_order"] = Band.values
    return JsonResponse(data)


@policy.page("verifier_latency_data")
def verifier_latency_data(request):
    return JsonResponse(selectors.verifier_latency(**_filters(request), hours=_bounded(request, "hours", 24, 24 * 30)))


@policy.page("campaigns_progress_data")
def campaigns_progress_data(request):
    return JsonResponse({"campaigns": selectors.campaigns_progress(**_filters(request))})


@policy.page("operating_characteristic_data")
def operating_characteristic_data(request):
    """The stopping rule's operating characteristic on one environment (its thresholds and policy)."""
    environment = get_object_or_404(Environment, name=request.GET.get("environment", ""))
    return JsonResponse(selectors.operating_characteristic(environment=environment))
