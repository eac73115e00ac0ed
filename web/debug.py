"""Django's debug pages (tracebacks, settings, URL patterns) for loopback clients only.

`make run` sets DEBUG=1; its server listens on 127.0.0.1 unless PASSBAND_BIND says otherwise, and even then a
client on another machine gets the plain error pages, never the technical ones. Building the
technical 500 page of a deep traceback also costs seconds of CPU, which a remote client must not be
able to ask for."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import Http404, HttpRequest
from django.views import debug, defaults


def is_loopback(request: HttpRequest | None) -> bool:
    """Whether the request came from this machine (127.0.0.0/8 or ::1)."""
    if request is None:
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


class LoopbackExceptionReporter(debug.ExceptionReporter):
    """settings.DEFAULT_EXCEPTION_REPORTER: the technical 500 page for loopback clients; others get
    the plain one, and nothing of the traceback is computed for them."""

    def get_traceback_html(self):
        if is_loopback(self.request):
            return super().get_traceback_html()
        return "<!doctype html><title>Server error</title><h1>Server error (500)</h1>"

    def get_traceback_text(self):
        if is_loopback(self.request):
            return super().get_traceback_text()
        return "Server error (500)"


class LoopbackDebugPagesMiddleware:
    """Under DEBUG, a 404 page for anyone but staff on loopback is the site's own (templates/404.html),
    not Django's technical page listing every URL pattern."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and response.get("Content-Type", "").startswith("text/html")
            and not (is_loopback(request) and getattr(getattr(request, "user", None), "is_staff", False))
        ):
            return defaults.page_not_found(request, Http404())
        return response
