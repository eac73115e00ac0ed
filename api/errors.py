"""Every API error in one JSON form: {"detail", "code", "fields"} (accounts.errors.api_error_document,
described in docs/api.md). DRF calls `exception_handler` for whatever a view or the framework raises
(validation, parse errors, authentication, permissions, throttling, 404s); views raise the
exceptions here instead of building error responses of their own."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from accounts.errors import DATABASE_BUSY, RETRY_AFTER_S, api_error_document, is_database_locked

logger = logging.getLogger(__name__)
NON_FIELD = ("non_field_errors", "detail")


class Conflict(exceptions.APIException):
    """409: the request is fine but the object is not in a state that allows it (a release not ready)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object is not in a state that allows this."
    default_code = "conflict"


def field_errors(data: Any, path: str = "") -> dict[str, list[str]]:
    """DRF's error data (nested dicts and lists of messages) flattened to {"items[2].task": [messages]}."""
    if isinstance(data, dict):
        flat: dict[str, list[str]] = {}
        for name, value in data.items():
            flat.update(field_errors(value, f"{path}.{name}" if path else str(name)))
        return flat
    if isinstance(data, list) and data and all(isinstance(item, str) for item in data):
        return {path: [str(item) for item in data]}
    if isinstance(data, list):
        flat = {}
        for index, item in enumerate(data):
            flat.update(field_errors(item, f"{path}[{index}]"))
        return flat
    return {path: [str(data)]} if data not in (None, "", {}) else {}


def error_document(data: Any, code: str) -> dict:
    """DRF's error data as the one JSON form: field messages under `fields`, one sentence in `detail`."""
    fields = field_errors(data if isinstance(data, dict) else {"": data})
    general = [message for name in ("", *NON_FIELD) for message in fields.pop(name, [])]
    detail = " ".join(general + [f"{name}: {' '.join(messages)}" for name, messages in fields.items()])
    return api_error_document(detail=detail or "The request was refused.", code=code, fields=fields)


def error_code(exc: Exception, status_code: int) -> str:
    if isinstance(exc, exceptions.ValidationError):
        return "invalid"
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        return codes if isinstance(codes, str) else exc.default_code
    return {404: "not_found", 403: "permission_denied"}.get(status_code, "error")


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's exception handler (which keeps headers such as Retry-After), answering in the one JSON
    form; an unexpected exception is logged with its view and answered as a JSON 500, never as
    Django's HTML page."""
    response = drf_exception_handler(exc, context)
    if response is None and is_database_locked(exc):
        set_rollback()
        return Response(
            api_error_document(detail=DATABASE_BUSY, code="database_busy"),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    if response is None:
        view = context.get("view")
        logger.exception("API view %s failed", type(view).__name__ if view else "?", exc_info=exc)
        set_rollback()
        return Response(
            api_error_document(detail="Server error; it has been logged.", code="server_error"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    response.data = error_document(response.data, error_code(exc, response.status_code))
    return response
