"""Request counts and response times for Prometheus (see calibration.metrics), and the input rule
applied to every request's path, query and form fields."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse

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
    """Refuses, before any view runs, a request that breaks the input rule (engine.input_rules): its path
    or a query or form field holding a NUL or a lone surrogate, a query value too long or a whole number
    in it beyond 64 bits, or a form body over Django's limit: a 400 naming the field ("path" for the
    path), as the API's JSON error under /api/ and as text elsewhere. An id in the path beyond 64 bits
    names nothing: 404."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        reason = input_rules.text_problem(request.path_info)
        if reason is not None:
            return refusal(request, "path", reason, "invalid")
        try:
            query, form = list(request.GET.lists()), list(request.POST.lists())
        except RequestDataTooBig:
            return refusal(
                request, "", f"The body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes; send less.", "too_large"
            )
        problem = input_rules.query_problem(query) or input_rules.fields_problem(form)
        if problem is not None:
            return refusal(request, problem.path, problem.reason, "invalid")
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        for value in (*view_args, *view_kwargs.values()):
            if isinstance(value, int) and input_rules.integer_problem(value) is not None:
                raise Http404("No record has that id.")
        return None


def refusal(request, field: str, reason: str, code: str) -> HttpResponse:
    """A 400 for input the request carried: the API's JSON error under /api/, plain text for pages."""
    detail = f"{field}: {reason}" if field else reason
    if request.path.startswith("/api/"):
        document = api_error_document(detail=detail, code=code, fields={field: [reason]} if field else {})
        return JsonResponse(document, status=400)
    return HttpResponseBadRequest(f"Bad request. {detail}\n", content_type="text/plain; charset=utf-8")
