"""Serve this host's worker counters for Prometheus, on a host with no web process of its own."""

from __future__ import annotations

import hmac
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from calibration import metrics


def handler_for(*, folder: str, token: str) -> type[BaseHTTPRequestHandler]:
    class MetricsHandler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?", 1)[0] != "/metrics":
                return self._answer(404, b"Only /metrics is served here.\n", "text/plain")
            header = self.headers.get("Authorization", "")
            presented = header[len("Bearer ") :] if header.startswith("Bearer ") else ""
            if token and not hmac.compare_digest(presented.encode(), token.encode()):
                return self._answer(401, b"Metrics need the metrics token.\n", "text/plain")
            body, content_type = metrics.metrics_text(multiprocess_dir=folder, scrape_time=False)
            return self._answer(200, body, content_type)

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Bearer realm="metrics"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):  # noqa: A002 - http.server's signature
            pass

    return MetricsHandler


class Command(BaseCommand):
    help = (
        "Serve GET /metrics with the counters of every Passband process on this host (its "
        "PROMETHEUS_MULTIPROC_DIR), for a worker host with no web process: Prometheus scrapes each host, and "
        "its instance label keeps them apart. Queue depths and campaign progress come from the web app's "
        "/metrics. Asks for `Authorization: Bearer $PASSBAND_METRICS_TOKEN` when that is set."
    )

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=9464, help="Port (default 9464).")

    def handle(self, *args, **options):
        folder = settings.PASSBAND_METRICS_DIR
        if not folder:
            raise CommandError("Set PROMETHEUS_MULTIPROC_DIR to the folder this host's workers write to.")
        token = settings.PASSBAND_METRICS_TOKEN
        if options["bind"] not in ("127.0.0.1", "localhost") and not token:
            raise CommandError("Set PASSBAND_METRICS_TOKEN before serving metrics beyond this host.")
        server = ThreadingHTTPServer((options["bind"], options["port"]), handler_for(folder=folder, token=token))
        self.stdout.write(f"serving {folder} on http://{options['bind']}:{server.server_address[1]}/metrics")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
