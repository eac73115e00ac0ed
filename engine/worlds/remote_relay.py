"""How an installed provider of a remote protocol reaches its server from a helper that has no network: every
HTTP request its client makes is data sent to the host (the worker or web process), whose own code makes it.

In the helper (engine/worlds/provider_worker.py), the ``RemoteServer`` a task carries gives a ``RemoteEndpoint``
whose ``client()`` is an httpx client over ``RelayTransport``: each request goes to the host as one question
(method, URL, headers, body) and comes back as the response, or as the httpx error its failure would be. The
endpoint there has the server's URL and no headers: the bearer token read from the operator's variable never
enters the helper. ``session_slot`` is the host's (held for the whole episode), ``tools_guard`` a question too.

On the host, ``HostRelay`` answers those questions for one episode (or one listing of tools): a request to any
origin but the registered server's is refused, the rest leave through the endpoint's own client (the outbound
policy: resolved address checked, no redirects, short timeouts) with the endpoint's headers. A server that
could not be reached, or a tools guard that failed, is remembered (``failure``), so the host raises the
infrastructure outcome even when the provider's code swallowed the error.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from engine.episodes.remote_mcp import RemoteUnavailable
from engine.worlds.provider import RemoteEndpoint, RemoteServer

MAX_BODY_BYTES = 16 << 20  # a response larger than this is the server's failure, not the helper's memory's
# Headers the host sets itself (the connection's, the body's length, the server's credentials).
HOST_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "authorization", "cookie"})

Ask = Callable[[dict[str, Any]], dict[str, Any]]


# -- in the helper -------------------------------------------------------------------------------------


class RelayTransport(httpx.BaseTransport):
    """An httpx transport that hands each request to the host (``ask``) instead of opening a connection."""

    def __init__(self, ask: Ask) -> None:
        self.ask = ask

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        question = {
            "op": "http",
            "method": request.method,
            "url": str(request.url),
            "headers": [[name, value] for name, value in request.headers.items()],
            "body": base64.b64encode(request.read()).decode(),
        }
        answer = self.ask(question)
        if "status" not in answer:
            message = str(answer.get("refused") or answer.get("unreachable") or answer)
            if "refused" in answer:
                raise httpx.ConnectError(f"refused by the host: {message}", request=request)
            if answer.get("reason") == "timeout":
                raise httpx.ReadTimeout(message, request=request)
            raise httpx.ConnectError(message, request=request)
        return httpx.Response(
            int(answer["status"]),
            headers=[(str(name), str(value)) for name, value in answer.get("headers") or []],
            content=base64.b64decode(answer.get("body") or ""),
            request=request,
        )


def helper_server(raw: dict[str, Any], ask: Ask) -> RemoteServer:
    """The task's remote server as a provider sees it in its helper: ``raw`` is ``{"name", "protocol"}`` and,
    in an episode or a listing of tools, ``"endpoint": {"url", "timeout_s"}``; without one the server cannot be
    reached from there (claims and prepare)."""
    name, endpoint = str(raw["name"]), raw.get("endpoint")

    def client_config() -> RemoteEndpoint:
        if not isinstance(endpoint, dict):
            raise RemoteUnavailable(f"server {name} is lent to a provider's episodes only", reason="refused")
        return relayed_endpoint(name, endpoint, ask)

    def tools_guard(offered: list[dict[str, Any]], allowed: tuple[str, ...]) -> None:
        answer = ask({"op": "tools_guard", "offered": offered, "allowed": list(allowed)})
        if "unavailable" in answer:
            raise RemoteUnavailable(str(answer["unavailable"]), reason=str(answer.get("reason") or "schema_changed"))

    return RemoteServer(
        name=name,
        protocol=str(raw["protocol"]),
        client_config=client_config,
        session_slot=contextlib.nullcontext,
        tools_guard=tools_guard,
    )


def relayed_endpoint(name: str, endpoint: dict[str, Any], ask: Ask) -> RemoteEndpoint:
    """The endpoint a helper's provider connects through: the server's URL, no headers, the host's relay."""
    return RemoteEndpoint(
        name=name, url=str(endpoint["url"]), headers={}, timeout_s=float(endpoint["timeout_s"]), relay=ask
    )


def relay_client(endpoint: RemoteEndpoint) -> httpx.Client:
    """``endpoint.client()`` in a helper: an httpx client whose requests the host makes."""
    assert endpoint.relay is not None
    return httpx.Client(
        transport=RelayTransport(endpoint.relay),
        timeout=endpoint.timeout_s,
        follow_redirects=False,
        trust_env=False,
    )


# -- on the host ---------------------------------------------------------------------------------------


def endpoint_request(endpoint: RemoteEndpoint) -> dict[str, Any]:
    """What a helper is told of the server: its URL and seconds per request (never its headers)."""
    return {"url": endpoint.url, "timeout_s": endpoint.timeout_s}


class HostRelay:
    """The host's answers to one helper's questions about ``endpoint`` (``answer``), for one episode or one
    listing; ``tools_guard`` is the host's check of a session's tools (None: nothing to check)."""

    def __init__(self, endpoint: RemoteEndpoint, *, tools_guard: Callable[[list, tuple[str, ...]], None] | None):
        from engine import outbound

        self.endpoint = endpoint
        self.origin = outbound.origin(endpoint.url)
        self.tools_guard = tools_guard
        self.failure: RemoteUnavailable | None = None
        self.refused: str = ""
        self._client: httpx.Client | None = None

    def answer(self, question: dict[str, Any]) -> dict[str, Any]:
        """One question's answer; never raises."""
        try:
            if question.get("op") == "http":
                return self._http(question)
            if question.get("op") == "tools_guard":
                return self._guard(question)
            return {"refused": f"the host answers no {question.get('op')!r} question"}
        except Exception as error:  # noqa: BLE001 - a question the host cannot answer is the helper's answer
            return {"refused": f"{type(error).__name__}: {error}"}

    def _http(self, question: dict[str, Any]) -> dict[str, Any]:
        from engine import outbound

        url = str(question.get("url") or "")
        if outbound.origin(url) != self.origin:
            self.refused = f"only the registered server {self.origin} may be reached, not {outbound.origin(url)}"
            return {"refused": self.refused}
        headers = {
            str(name): str(value)
            for name, value in question.get("headers") or []
            if str(name).lower() not in HOST_HEADERS
        }
        headers.update(self.endpoint.headers)
        try:
            response = self._session().request(
                str(question.get("method") or "GET"),
                url,
                headers=headers,
                content=base64.b64decode(question.get("body") or ""),
            )
        except outbound.OutboundRefused as error:
            self.refused = str(error)
            self.failure = self.failure or RemoteUnavailable(f"server {self.endpoint.name}: {error}", reason="refused")
            return {"refused": self.refused}
        except httpx.TimeoutException as error:
            return self._unreachable(error, reason="timeout")
        except httpx.HTTPError as error:
            return self._unreachable(error, reason="unreachable")
        if len(response.content) > MAX_BODY_BYTES:
            return self._unreachable(RuntimeError(f"a response over {MAX_BODY_BYTES} bytes"), reason="server_error")
        return {
            "status": response.status_code,
            "headers": [[name, value] for name, value in response.headers.items()],
            "body": base64.b64encode(response.content).decode(),
        }

    def _unreachable(self, error: Exception, *, reason: str) -> dict[str, Any]:
        message = f"{type(error).__name__}: {error}"
        self.failure = self.failure or RemoteUnavailable(f"server {self.endpoint.name}: {message}", reason=reason)
        return {"unreachable": message, "reason": reason}

    def _guard(self, question: dict[str, Any]) -> dict[str, Any]:
        if self.tools_guard is None:
            return {}
        try:
            self.tools_guard(list(question.get("offered") or []), tuple(map(str, question.get("allowed") or ())))
        except RemoteUnavailable as error:
            self.failure = self.failure or error
            return {"unavailable": str(error), "reason": error.reason}
        return {}

    def _session(self) -> httpx.Client:
        if self._client is None:
            self._client = self.endpoint.client()
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


@contextlib.contextmanager
def host_relay(
    endpoint: RemoteEndpoint, *, tools_guard: Callable[[list, tuple[str, ...]], None] | None = None
) -> Iterator[HostRelay]:
    """A ``HostRelay`` for the block, its connection closed after."""
    relay = HostRelay(endpoint, tools_guard=tools_guard)
    try:
        yield relay
    finally:
        relay.close()
