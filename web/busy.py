"""A database that stayed locked is a 503 with Retry-After, never a 500.

On the embedded default (SQLite) one transaction writes at a time and others wait up to the busy timeout; a
request that still found the database locked after that wait is answered "busy, try again", in JSON for the
API and as a short page elsewhere."""

from __future__ import annotations

import logging

from django.http import HttpResponse, JsonResponse

from accounts.errors import DATABASE_BUSY, RETRY_AFTER_S, api_error_document, is_database_locked

logger = logging.getLogger(__name__)


class DatabaseBusyMiddleware:
    """Turns a locked database into a 503 with Retry-After (the request wrote nothing: its transaction failed)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not is_database_locked(exception):
            return None
        logger.warning("database locked: %s %s answered 503", request.method, request.path)
        if request.path.startswith("/api/"):
            response = JsonResponse(api_error_document(detail=DATABASE_BUSY, code="database_busy"), status=503)
        else:
            response = HttpResponse(DATABASE_BUSY, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
