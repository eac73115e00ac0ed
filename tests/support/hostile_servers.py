"""Real listeners on loopback for the outbound-policy tests: a stand-in for a cloud metadata service
that counts every connection it accepts, a server that redirects every request there, a server that
accepts and never answers, and a recorder of the Authorization headers a server is sent.

    with MetadataListener() as metadata, Redirector(to=metadata.url) as redirector:
        ...  # metadata.connections == 0 proves nothing reached it
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# What the stand-in serves: a client that reads it has leaked the machine's credentials.
METADATA_BODY = b'{"AccessKeyId": "ASIA-LEAKED", "SecretAccessKey": "leaked"}'
# An OpenEnv /schema, so a redirecting server passes the schema read and redirects the /ws session.
ACTION_SCHEMA = {"action": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.connections = 0
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self._lock:
            self.connections += 1
        return True


class _Running:
    handler: type[BaseHTTPRequestHandler]

    def __init__(self) -> None:
        self.server = _Server(self.handler)
        self.server.owner = self  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def connections(self) -> int:
        return self.server.connections

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Recording(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append(  # type: ignore[attr-defined]
            {
                "method": self.command,
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "body": body,
            }
        )

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _MetadataHandler(_Recording):
    def do_GET(self) -> None:
        self._record()
        self._send(200, METADATA_BODY)

    do_POST = do_GET


class MetadataListener(_Running):
    """Stands in for 169.254.169.254 on loopback: answers every request with credentials."""

    handler = _MetadataHandler


class _RedirectHandler(_Recording):
    def do_GET(self) -> None:
        self._record()
        if self.path == "/schema":
            self._send(200, json.dumps(ACTION_SCHEMA).encode())
        else:
            self._send(302, b"", Location=self.server.owner.to + self.path)  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self._record()
        self._send(307, b"", Location=self.server.owner.to + self.path)  # type: ignore[attr-defined]


class Redirector(_Running):
    """Redirects every request (GET 302, POST 307; the OpenEnv /ws handshake too) to `to`; answers
    GET /schema with an OpenEnv action schema."""

    handler = _RedirectHandler

    def __init__(self, *, to: str) -> None:
        self.to = to.rstrip("/")
        super().__init__()


class _EchoHandler(_Recording):
    def do_POST(self) -> None:
        self._record()
        reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok\nVERDICT: PASS"}}]}
        self._send(200, json.dumps(reply).encode())

    do_GET = do_POST


class Recorder(_Running):
    """Answers every request with a passing chat completion and records its Authorization header."""

    handler = _EchoHandler


class Staller:
    """Accepts connections and reads, never answers, until closed: a server that holds a client."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self._socket.settimeout(0.2)
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                continue
            self.connections += 1
            self._held.append(connection)

    def __enter__(self) -> Staller:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closed.set()
        self._thread.join()
        for connection in self._held:
            connection.close()
        self._socket.close()
