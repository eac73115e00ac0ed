"""Settings of what reaches outside the server or comes in from outside: the outbound policy and its
secrets, LLM judges, MCP stdio servers, OpenID Connect sign-in, and the metrics endpoint. A value the
engine refuses stops the start with ImproperlyConfigured naming the group."""

import json
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from passband.settings_parts.env import env_float

# Connections that leave the server (engine/outbound, docs/operations.md "Outbound connections"): only to
# global addresses, unless a host is allowed here as written (a compose deployment's own services:
# "tools,judge:8000"); secrets for outside services only from variables declared here, each bound to
# the origins it may be sent to: JSON {"TOOLS_API_KEY": ["https://tools.example.com"]}.
try:
    from engine import outbound as _outbound

    PASSBAND_OUTBOUND_ALLOW_HOSTS = os.environ.get("PASSBAND_OUTBOUND_ALLOW_HOSTS", "")
    PASSBAND_OUTBOUND_SECRETS = _outbound.parse_secrets(os.environ.get("PASSBAND_OUTBOUND_SECRETS", ""))
    # Seconds to connect; and the most a registration check waits for a server's answer.
    PASSBAND_OUTBOUND_CONNECT_TIMEOUT_S = env_float("PASSBAND_OUTBOUND_CONNECT_TIMEOUT_S", 5.0)
    PASSBAND_OUTBOUND_CHECK_TIMEOUT_S = env_float("PASSBAND_OUTBOUND_CHECK_TIMEOUT_S", 10.0)
    _outbound.configure(
        allowed_hosts=PASSBAND_OUTBOUND_ALLOW_HOSTS,
        secrets=os.environ.get("PASSBAND_OUTBOUND_SECRETS", ""),
        connect_timeout_s=PASSBAND_OUTBOUND_CONNECT_TIMEOUT_S,
        check_timeout_s=PASSBAND_OUTBOUND_CHECK_TIMEOUT_S,
    )
except ValueError as _error:
    raise ImproperlyConfigured(f"Outbound settings: {_error}") from None

# LLM judges that llm_judge tasks may name (a task names one, never a URL or a key variable):
# JSON {"name": {"base_url": "http://judge:8000/v1", "model": "...", "api_key_env": "JUDGE_API_KEY"}}.
# Completions longer than PASSBAND_MAX_COMPLETION_CHARS fail without being parsed.
try:
    from engine.verifiers import configure as _configure_verifiers
    from engine.verifiers import parse_judges as _parse_judges

    PASSBAND_JUDGES = _parse_judges(os.environ.get("PASSBAND_JUDGES", ""))
    PASSBAND_MAX_COMPLETION_CHARS = int(os.environ.get("PASSBAND_MAX_COMPLETION_CHARS", "1000000"))
    _configure_verifiers(judges=PASSBAND_JUDGES, max_completion_chars=PASSBAND_MAX_COMPLETION_CHARS)
    for _name, _judge in PASSBAND_JUDGES.items():
        if _judge.get("api_key_env") and (
            _problem := _outbound.secret_problem(_judge["api_key_env"], url=_judge["base_url"])
        ):
            raise ValueError(f"judge {_name}: api_key_env {_problem}")
except ValueError as _error:
    raise ImproperlyConfigured(f"Verifier settings: {_error}") from None


# Sign-in for organisations (accounts/oidc.py, docs/review.md): OpenID Connect, on when
# PASSBAND_OIDC_CLIENT_ID is set. Roles come from the groups claim on every sign-in;
# PASSBAND_OIDC_ROLE_CLAIMS maps claim values to roles as JSON ({"ml-reviewers": "reviewers"}).
OIDC_RP_CLIENT_ID = os.environ.get("PASSBAND_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("PASSBAND_OIDC_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("PASSBAND_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("PASSBAND_OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = os.environ.get("PASSBAND_OIDC_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = os.environ.get("PASSBAND_OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_RP_SCOPES = "openid email profile groups"
OIDC_USE_PKCE = True
# The ID token must come from this issuer (its `iss`, e.g. https://login.example.org/realms/staff) for this
# audience (its `aud`; default: the client id). Every call to the provider gives up after OIDC_TIMEOUT s.
PASSBAND_OIDC_ISSUER = os.environ.get("PASSBAND_OIDC_ISSUER", "")
PASSBAND_OIDC_AUDIENCE = os.environ.get("PASSBAND_OIDC_AUDIENCE", "")
OIDC_TIMEOUT = env_float("PASSBAND_OIDC_TIMEOUT", 10.0)
if OIDC_RP_CLIENT_ID and not PASSBAND_OIDC_ISSUER:
    raise ImproperlyConfigured("PASSBAND_OIDC_ISSUER must be set with PASSBAND_OIDC_CLIENT_ID (the ID token's `iss`).")
OIDC_CALLBACK_CLASS = "web.views.sign_in.OidcCallback"
PASSBAND_OIDC_GROUPS_CLAIM = os.environ.get("PASSBAND_OIDC_GROUPS_CLAIM", "groups")
PASSBAND_OIDC_ROLE_CLAIMS = json.loads(os.environ.get("PASSBAND_OIDC_ROLE_CLAIMS", "{}") or "{}")
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "accounts.oidc.PassbandOIDCBackend"]

# MCP tool servers (curation/mcp_servers.py). Staff register streamable HTTP servers by URL on a page;
# a stdio server runs a command on the worker, so it is named here only:
# JSON {"name": {"command": ["python", "-m", "tools"], "env": {"VAR": "value"}}}.
try:
    from engine.episodes.remote_mcp import parse_stdio_servers as _parse_stdio_servers

    PASSBAND_MCP_STDIO_SERVERS = _parse_stdio_servers(os.environ.get("PASSBAND_MCP_STDIO_SERVERS", ""))
except ValueError as _error:
    raise ImproperlyConfigured(f"MCP settings: {_error}") from None


# Metrics (calibration/metrics.py). Celery's prefork children and gunicorn's workers write their samples
# to PROMETHEUS_MULTIPROC_DIR, a folder every process of a host shares, emptied when the stack starts;
# /metrics adds them up. /metrics answers staff and `Authorization: Bearer <PASSBAND_METRICS_TOKEN>`.
PASSBAND_METRICS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if PASSBAND_METRICS_DIR:
    Path(PASSBAND_METRICS_DIR).mkdir(parents=True, exist_ok=True)
PASSBAND_METRICS_TOKEN = os.environ.get("PASSBAND_METRICS_TOKEN", "")
