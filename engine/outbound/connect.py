"""The one way out: resolve a host once, check every address (engine/outbound/policy.py), connect to
a checked address, and the clients built on it. Every client that leaves the server goes through
here: httpx (the openai backend, judges, OpenEnv's /schema), httpx2 inside the `mcp` SDK, and the
socket under OpenEnv's websockets session. No client here follows a redirect, reads proxy settings
from the environment, or waits longer than the policy's connect timeout to connect.

    with outbound.http_client(timeout_s=30) as client:
        client.post(url, json=body)         # refused: OutboundRefused, before any byte is sent
"""

from __future__ import annotations

import socket
from typing import Any

import anyio
import httpcore
import httpcore2
import httpx
import httpx2

from engine.outbound.policy import OutboundPolicy, current_policy, resolve


def _connect_timeout(timeout: float | None, policy: OutboundPolicy) -> float:
    return policy.connect_timeout_s if timeout is None else min(timeout, policy.connect_timeout_s)


def open_socket(
    host: str, port: int, *, timeout: float | None = None, policy: OutboundPolicy | None = None
) -> socket.socket:
    """A TCP socket connected to a checked address of `host`:`port`. Raises OutboundRefused
    (policy), OSError (lookup or connection failed) or TimeoutError."""
    policy = policy or current_policy()
    failure: OSError | None = None
    for address in resolve(host, port, policy=policy):
        try:
            return socket.create_connection((str(address), port), timeout=_connect_timeout(timeout, policy))
        except OSError as error:  # TimeoutError included: the next address may answer
            failure = error
    raise failure or OSError(f"{host}: no address to connect to")


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend, connecting only to checked addresses (TLS still names the host)."""

    def __init__(self, policy: OutboundPolicy | None) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        policy = self._policy or current_policy()
        try:
            addresses = resolve(host, port, policy=policy)
        except OSError as error:
            raise httpcore.ConnectError(f"{host}: {error}") from error
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    str(address), port, _connect_timeout(timeout, policy), local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise httpcore.ConnectError("outbound connections are TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _GuardedAsyncBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's (the `mcp` SDK's) async network backend, connecting only to checked addresses."""

    def __init__(self, policy: OutboundPolicy | None) -> None:
        self._policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore2.AsyncNetworkStream:
        policy = self._policy or current_policy()
        try:
            addresses = await anyio.to_thread.run_sync(lambda: resolve(host, port, policy=policy))
        except OSError as error:
            raise httpcore2.ConnectError(f"{host}: {error}") from error
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, _connect_timeout(timeout, policy), local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise httpcore2.ConnectError("outbound connections are TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport on the guarded backend, no proxies from the environment."""

    def __init__(self, *, policy: OutboundPolicy | None = None, limits: httpx.Limits = httpx.Limits()) -> None:
        super().__init__(trust_env=False, limits=limits)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(policy),
        )


class GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
    """httpx2's async transport on the guarded backend (for the `mcp` SDK), no environment proxies."""

    def __init__(self, *, policy: OutboundPolicy | None = None) -> None:
        super().__init__(trust_env=False)
        limits = httpx2.Limits()
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedAsyncBackend(policy),
        )


def http_timeout(timeout_s: float, *, policy: OutboundPolicy | None = None) -> httpx.Timeout:
    """`timeout_s` for reading, writing and the pool; connecting within the policy's connect timeout."""
    policy = policy or current_policy()
    return httpx.Timeout(timeout_s, connect=min(timeout_s, policy.connect_timeout_s))


def http_client(
    *,
    timeout_s: float,
    headers: dict[str, str] | None = None,
    limits: httpx.Limits = httpx.Limits(),
    policy: OutboundPolicy | None = None,
) -> httpx.Client:
    """An httpx client that leaves the server only through the policy, never following a redirect."""
    return httpx.Client(
        transport=GuardedTransport(policy=policy, limits=limits),
        headers=headers,
        timeout=http_timeout(timeout_s, policy=policy),
        follow_redirects=False,
        trust_env=False,
    )


def mcp_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The `mcp` SDK's client factory (its `McpHttpClientFactory` signature) through the policy: the
    SDK's own factory follows redirects; this one does not."""
    policy = current_policy()
    if timeout is None:
        timeout = httpx2.Timeout(30.0)
    connect = min(timeout.connect or policy.connect_timeout_s, policy.connect_timeout_s)
    return httpx2.AsyncClient(
        transport=GuardedAsyncTransport(policy=policy),
        headers=headers,
        timeout=httpx2.Timeout(timeout.read, connect=connect, write=timeout.write, pool=timeout.pool),
        auth=auth,
        follow_redirects=False,
        trust_env=False,
    )
