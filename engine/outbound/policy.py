"""The outbound-URL policy: which URLs a client leaving the server may use, which hosts the operator
allows outside the global-address rule, and the connect and check timeouts (docs/operations.md,
"Outbound connections").

Configured once per process: Django feeds it from passband/settings.py (`configure`); a process
without Django (a trainer, a benchmark) reads the same variables from its environment on first use:
PASSBAND_OUTBOUND_ALLOW_HOSTS, PASSBAND_OUTBOUND_SECRETS, PASSBAND_OUTBOUND_CONNECT_TIMEOUT_S and
PASSBAND_OUTBOUND_CHECK_TIMEOUT_S.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from engine.outbound.addresses import IPAddress, address_problem, literal_address

_SECRET_PARAMETERS = {"key", "api_key", "apikey", "token", "access_token", "secret", "password", "auth"}
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Variables that configure Passband itself: never an outside service's secret, whatever is declared.
OWN_VARIABLES = frozenset({"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS"})
OWN_PREFIXES = ("PASSBAND_", "DJANGO_", "CELERY_", "AWS_", "POSTGRES", "PG", "OIDC_")
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class OutboundRefused(ValueError):
    """The policy refuses a URL, an address or a secret; the message says which and why, and
    `reason` is "url", "address" or "secret"."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class OutboundPolicy:
    """`allowed_hosts`: (host as written in URLs, port or None for any) pairs that may be reached
    whatever their address (a compose deployment's own services); `secrets`: declared variable ->
    the origins its value may be sent to; timeouts in seconds."""

    allowed_hosts: frozenset[tuple[str, int | None]] = frozenset()
    secrets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    connect_timeout_s: float = 5.0
    check_timeout_s: float = 10.0

    def host_allowed(self, host: str, port: int) -> bool:
        """Whether the operator allows `host` (as the URL writes it) on `port` explicitly."""
        host = host.strip("[]").lower()
        return (host, None) in self.allowed_hosts or (host, port) in self.allowed_hosts


def parse_allowed_hosts(text: str) -> frozenset[tuple[str, int | None]]:
    """PASSBAND_OUTBOUND_ALLOW_HOSTS: comma-separated `host` or `host:port` (IPv6 in brackets,
    `[::1]:8000`). A host matches only as written: allowing 127.0.0.1 does not allow 2130706433 or
    localhost. Raises ValueError naming the entry."""
    allowed: set[tuple[str, int | None]] = set()
    for entry in (part.strip() for part in (text or "").split(",")):
        if not entry:
            continue
        try:
            parts = urlsplit(f"http://{entry}")
            port = parts.port
        except ValueError:
            raise ValueError(f"PASSBAND_OUTBOUND_ALLOW_HOSTS: {entry!r} is not host or host:port") from None
        if not parts.hostname or parts.path or parts.query or parts.username:
            raise ValueError(f"PASSBAND_OUTBOUND_ALLOW_HOSTS: {entry!r} is not host or host:port")
        allowed.add((parts.hostname.lower(), port))
    return frozenset(allowed)


def origin(url: str) -> str:
    """`scheme://host:port` of an http(s) or ws(s) URL, lower-cased, the port always written."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def own_variable(name: str) -> bool:
    """Whether `name` is one of the variables that configure Passband itself."""
    return name.upper() in OWN_VARIABLES or name.upper().startswith(OWN_PREFIXES)


def parse_secrets(text: str) -> dict[str, tuple[str, ...]]:
    """PASSBAND_OUTBOUND_SECRETS: JSON `{"VARIABLE": ["https://api.example.com", ...]}`, each
    variable an outside service's secret and the origins it may be sent to. A variable that
    configures Passband (SECRET_KEY, DATABASE_URL, PASSBAND_*...) is refused. Raises ValueError."""
    if not text or not text.strip():
        return {}
    try:
        raw: Any = json.loads(text)
    except ValueError as error:
        raise ValueError(f"PASSBAND_OUTBOUND_SECRETS is not JSON: {error}") from None
    if not isinstance(raw, Mapping):
        raise ValueError('PASSBAND_OUTBOUND_SECRETS must be a JSON object {"VARIABLE": ["https://origin"]}')
    secrets: dict[str, tuple[str, ...]] = {}
    for name, origins in raw.items():
        if not _VARIABLE.fullmatch(name):
            raise ValueError(f"PASSBAND_OUTBOUND_SECRETS: {name!r} is not an environment variable name")
        if own_variable(name):
            raise ValueError(f"PASSBAND_OUTBOUND_SECRETS: {name} configures Passband itself; it is never sent out")
        if not isinstance(origins, list) or not origins or not all(isinstance(item, str) for item in origins):
            raise ValueError(f"PASSBAND_OUTBOUND_SECRETS: {name} needs a non-empty list of origins")
        for item in origins:
            parts = urlsplit(item)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
                raise ValueError(f"PASSBAND_OUTBOUND_SECRETS: {name}: {item!r} is not an origin like https://host:port")
        secrets[name] = tuple(origin(item) for item in origins)
    return secrets


_lock = threading.Lock()
_configured: list[OutboundPolicy] = []


def configure(
    *,
    allowed_hosts: str = "",
    secrets: str = "",
    connect_timeout_s: float = 5.0,
    check_timeout_s: float = 10.0,
) -> OutboundPolicy:
    """Set this process's policy from the settings' texts (formats above). Raises ValueError."""
    if not 0 < connect_timeout_s <= 60 or not 0 < check_timeout_s <= 600:
        raise ValueError("need 0 < PASSBAND_OUTBOUND_CONNECT_TIMEOUT_S <= 60 and 0 < ..._CHECK_TIMEOUT_S <= 600")
    policy = OutboundPolicy(
        allowed_hosts=parse_allowed_hosts(allowed_hosts),
        secrets=parse_secrets(secrets),
        connect_timeout_s=connect_timeout_s,
        check_timeout_s=check_timeout_s,
    )
    set_policy(policy)
    return policy


def set_policy(policy: OutboundPolicy) -> None:
    with _lock:
        _configured[:] = [policy]


def current_policy() -> OutboundPolicy:
    """The policy in force: the configured one, else one read from the environment."""
    with _lock:
        if _configured:
            return _configured[0]
    environ = os.environ
    return configure(
        allowed_hosts=environ.get("PASSBAND_OUTBOUND_ALLOW_HOSTS", ""),
        secrets=environ.get("PASSBAND_OUTBOUND_SECRETS", ""),
        connect_timeout_s=float(environ.get("PASSBAND_OUTBOUND_CONNECT_TIMEOUT_S") or 5.0),
        check_timeout_s=float(environ.get("PASSBAND_OUTBOUND_CHECK_TIMEOUT_S") or 10.0),
    )


def url_problem(url: str, *, policy: OutboundPolicy | None = None, schemes: tuple[str, ...] = ("http", "https")) -> str:
    """What is wrong with `url` as an outside server's address, "" when nothing, without a lookup:
    an http(s) URL with a host, no credentials in it (user:password@ or a key in the query: secrets
    are declared variables), no fragment, and a host that is no literal non-global address (in any
    spelling) unless the operator allows it. A name is resolved and checked on connecting."""
    if not isinstance(url, str) or not url.strip():
        return "the URL is empty; give the server's address, such as https://tools.example.com/mcp"
    try:
        parts = urlsplit(url.strip())
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError as error:
        return f"the URL {url!r} cannot be parsed ({error})"
    if parts.scheme not in schemes:
        return f"the URL must start with {' or '.join(scheme + '://' for scheme in schemes)}, got {url!r}"
    if not parts.hostname:
        return f"the URL {url!r} has no host"
    if parts.username is not None or parts.password is not None:
        return "the URL carries credentials (user:password@): name a declared secret variable instead"
    secret = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if name.lower() in _SECRET_PARAMETERS]
    if secret:
        return f"the URL's query carries a secret ({secret[0]}=...): name a declared secret variable instead"
    if parts.fragment:
        return f"the URL {url!r} has a fragment (#...); an endpoint has none"
    policy = policy or current_policy()
    if policy.host_allowed(parts.hostname, port):
        return ""
    address = literal_address(parts.hostname)
    if address is not None and (problem := address_problem(address)):
        return f"the host {parts.hostname} is refused: {problem} (see PASSBAND_OUTBOUND_ALLOW_HOSTS)"
    if names_this_machine(parts.hostname):
        return f"the host {parts.hostname} is refused: it names this machine (see PASSBAND_OUTBOUND_ALLOW_HOSTS)"
    return ""


def names_this_machine(host: str) -> bool:
    """`localhost` and `*.localhost` (RFC 6761), in any case, with or without the final dot."""
    return host.rstrip(".").lower().split(".")[-1] == "localhost"


def resolve(host: str, port: int, *, policy: OutboundPolicy | None = None) -> list[IPAddress]:
    """The addresses to connect to for `host`:`port`, looked up once and every one checked: a name
    any of whose addresses is not global is refused whole (a rebinding name gains nothing). A host
    the operator allows skips the check. Raises OutboundRefused, or OSError when the name does not
    resolve."""
    policy = policy or current_policy()
    if not policy.host_allowed(host, port) and names_this_machine(host):
        raise OutboundRefused(
            f"{host} is refused: it names this machine (see PASSBAND_OUTBOUND_ALLOW_HOSTS)", reason="address"
        )
    literal = literal_address(host)
    addresses: list[IPAddress] = [literal] if literal is not None else []
    if literal is None:
        for _family, _type, _proto, _name, sockaddr in socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM
        ):
            address = ip_address(sockaddr[0])
            if address not in addresses:
                addresses.append(address)
    if not policy.host_allowed(host, port):
        for address in addresses:
            if problem := address_problem(address):
                raise OutboundRefused(
                    f"{host} is refused: {problem} (see PASSBAND_OUTBOUND_ALLOW_HOSTS)", reason="address"
                )
    if not addresses:
        raise OSError(f"{host} has no address")
    return addresses
