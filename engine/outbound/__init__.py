"""Connections that leave the server: one URL policy, one resolve-check-connect function, secrets
bound to origins (no Django here: trainers and workers share it). See docs/operations.md,
"Outbound connections"."""

from engine.outbound.addresses import address_problem, embedded_ipv4, literal_address
from engine.outbound.connect import (
    GuardedAsyncTransport,
    GuardedTransport,
    http_client,
    http_timeout,
    mcp_http_client,
    open_socket,
)
from engine.outbound.policy import (
    OutboundPolicy,
    OutboundRefused,
    configure,
    current_policy,
    origin,
    own_variable,
    parse_allowed_hosts,
    parse_secrets,
    resolve,
    set_policy,
    url_problem,
)
from engine.outbound.secrets import bearer_headers, secret_for, secret_problem

__all__ = [
    "GuardedAsyncTransport",
    "GuardedTransport",
    "OutboundPolicy",
    "OutboundRefused",
    "address_problem",
    "bearer_headers",
    "configure",
    "current_policy",
    "embedded_ipv4",
    "http_client",
    "http_timeout",
    "literal_address",
    "mcp_http_client",
    "open_socket",
    "origin",
    "own_variable",
    "parse_allowed_hosts",
    "parse_secrets",
    "resolve",
    "secret_for",
    "secret_problem",
    "set_policy",
    "url_problem",
]
