"""Request counts and response times for Prometheus (see calibration.metrics)."""

from __future__ import annotations

import time

from calibration import metrics


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
