"""A proxy in front of a real inference server that answers each POST late: a slow server speaking the real
protocol (the bytes are the real server's own), for tests whose generations must outlast a limit.

    with SlowProxy("http://127.0.0.1:8091", delay_s=8) as proxy:   # proxy.url: "http://127.0.0.1:<port>"
        ...  # proxy.received, proxy.answered: POSTs taken in, and answered
        proxy.hold()     # answers wait (past their delay) until proxy.release()
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

# Hop-by-hop and length headers are the proxy's own to write.
_DROPPED = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class SlowProxy:
    """Forwards every request to `upstream` (a root URL, no /v1); each POST is answered `delay_s` after it came."""

    def __init__(self, upstream: str, *, delay_s: float) -> None:
        self.upstream, self.delay_s = upstream.rstrip("/"), delay_s
        self.received = self.answered = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.gate = threading.Event()
        self.gate.set()

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self.received - self.answered

    def count(self, field: str) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)

    def __enter__(self) -> SlowProxy:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.proxy = self
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        proxy: SlowProxy = self.server.proxy
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        proxy.count("received")
        started = time.monotonic()
        try:
            self._forward(body, not_before=started + proxy.delay_s, gate=proxy.gate)
        finally:
            proxy.count("answered")

    def _forward(self, body: bytes | None, *, not_before: float = 0.0, gate: threading.Event | None = None) -> None:
        proxy: SlowProxy = self.server.proxy
        headers = {key: value for key, value in self.headers.items() if key.lower() not in _DROPPED}
        try:
            answer = httpx.request(self.command, proxy.upstream + self.path, content=body, headers=headers, timeout=600)
        except httpx.HTTPError:
            self.send_error(502)
            return
        time.sleep(max(0.0, not_before - time.monotonic()))
        if gate is not None:
            gate.wait(timeout=600)
        self.send_response(answer.status_code)
        for key, value in answer.headers.items():
            if key.lower() not in _DROPPED:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)
