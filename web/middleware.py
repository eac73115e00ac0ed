"""Request counts and response times for Prometheus (see calibration.metrics), and the input rule
applied to every request's query and form fields."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse

from accounts.errors import api_error_document
from calibration import metrics
from engine import input_rules


class RequestMetricsMiddleware:
    """Counts every request by method and status class (2xx, 4xx...) and times it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        metrics.HTTP_SECONDS.labels(method=request.method).observe(time.perf_counter() - started)
        metrics.HTTP_REQUESTS.labels(method=request.method, status=f"{response.status_code // 100}xx").inc()
        return response


class InputRuleMiddleware:
    """Refuses, before any view runs, a request whose query or form fields break the input rule
    (engine.input_rules: no NUL, no lone surrogate) or whose form body is over Django's limit: a 400
    naming the field, as the API's JSON error under /api/ and as text elsewhere."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            fields = [*request.GET.lists(), *request.POST.lists()]
        except RequestDataTooBig:
            return refusal(
                request, "", f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes; send less.", "too_large"
            )
        problem = input_rules.fields_problem(fields)
        if problem is not None:
            return refusal(request, problem.path, problem.reason, "invalid")
        return self.get_response(request)


def refusal(request, field: str, reason: str, code: str) -> HttpResponse:
    """A 400 for input the request carried: the API's JSON error under /api/, plain text for pages."""
    detail = f"{field}: {reason}" if field else reason
    if request.path.startswith("/api/"):
        document = api_error_document(detail=detail, code=code, fields={field: [reason]} if field else {})
        return JsonResponse(document, status=400)
    return HttpResponseBadRequest(f"Bad request. {detail}\n", content_type="text/plain; charset=utf-8")
