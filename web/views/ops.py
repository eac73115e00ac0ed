"""Operations endpoints: /metrics for Prometheus and /healthz for compose and load balancers."""

from __future__ import annotations

import hmac
import time

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from calibration import metrics
from curation import policy


def _may_scrape(request: HttpRequest) -> bool:
    """Staff, or a scraper presenting `Authorization: Bearer <PASSBAND_METRICS_TOKEN>` (when one is set)."""
    token = settings.PASSBAND_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if (
        token
        and header.startswith("Bearer ")
        and hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())
    ):
        return True
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated and user.is_staff)


@require_GET
@policy.page("metrics")
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition: pipeline counters of every process sharing PASSBAND_METRICS_DIR, and
    queue depth and campaign progress read now. Staff or the metrics bearer token only."""
    if not _may_scrape(request):
        response = HttpResponse("Metrics need staff or the metrics token.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics.metrics_text(multiprocess_dir=settings.PASSBAND_METRICS_DIR)
    return HttpResponse(body, content_type=content_type)


@require_GET
@policy.page("healthz")
def healthz_view(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer, else 503; says which failed, never why (it is public)."""
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    healthy = all(checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "fail", **{name: "ok" if ok else "fail" for name, ok in checks.items()}},
        status=200 if healthy else 503,
    )


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:  # noqa: BLE001 - any failure means unhealthy
        return False


def _broker_ok() -> bool:
    url = settings.CELERY_BROKER_URL
    if url.startswith(("redis://", "rediss://")):
        import redis

        try:
            return bool(redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2).ping())
        except redis.RedisError:
            return False
    from celery import current_app as app

    started = time.monotonic()
    try:  # the filesystem broker of the embedded setup: a connection that opens is a broker that works
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return time.monotonic() - started < 5
    except Exception:  # noqa: BLE001
        return False
