"""Passband settings: everything that differs between machines comes from the environment.

Unset DATABASE_URL and CELERY_BROKER_URL give the embedded defaults (a SQLite file and a
filesystem broker under var/), so a laptop needs no servers; production sets both.
"""

import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PASSBAND_VAR_DIR", BASE_DIR / "var"))


TRUE_SPELLINGS = ("1", "true", "yes", "on")
FALSE_SPELLINGS = ("0", "false", "no", "off")


def env_bool(name: str, default: bool = False) -> bool:
    """A yes/no setting; unset or empty gives `default`. Any other spelling than the accepted ones
    (in any case) stops the start, so that a typo such as `ture` is never a silent False."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in TRUE_SPELLINGS:
        return True
    if raw in FALSE_SPELLINGS:
        return False
    accepted = ", ".join(TRUE_SPELLINGS + FALSE_SPELLINGS)
    raise ImproperlyConfigured(f"{name} must be a yes/no value ({accepted}), got {os.environ[name]!r}")


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from error


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    # Development only: a key that is obviously not for production.
    SECRET_KEY = "passband-development-only-not-secret"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "mozilla_django_oidc",
    "accounts",
    "curation",
    "calibration",
    "similarity",
    "releases",
    "web",
    "api",
]
# The longest write transaction of each process on SQLite, written under var/write-transactions/ (passband/
# write_timer.py): what the busy-day load test and bench/busy_day.py report.
PASSBAND_TIME_WRITE_TRANSACTIONS = env_bool("PASSBAND_TIME_WRITE_TRANSACTIONS", False)
if PASSBAND_TIME_WRITE_TRANSACTIONS:
    INSTALLED_APPS.append("passband.write_timer.WriteTimerConfig")

MIDDLEWARE = [
    "web.middleware.RequestMetricsMiddleware",
    "web.debug.LoopbackDebugPagesMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "web.middleware.InputRuleMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.audit_changes.AuditRequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, so that it sees a view's exceptions first: a locked database becomes a 503 with Retry-After.
    "web.busy.DatabaseBusyMiddleware",
]

# Debug pages (DEBUG=1, as `make run` sets) go to loopback clients only; others get the plain pages.
DEFAULT_EXCEPTION_REPORTER = "web.debug.LoopbackExceptionReporter"

ROOT_URLCONF = "passband.urls"
WSGI_APPLICATION = "passband.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'passband.sqlite3'}",
        conn_max_age=int(os.environ.get("CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # The web server and the workers share the file: write-ahead logging lets readers run beside a
    # writer; transactions take the write lock when they begin (IMMEDIATE), so two of them never
    # deadlock upgrading a read lock (SQLite's instant "database is locked"); others wait up to 30 s.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # No JIT compilation: the planner's costs for the lists' correlated subqueries pass its threshold at
    # real size, and compiling took 4.9 s of a 4.6 s review-queue query over 100,000 tasks (bench/real_size.py);
    # Passband's queries are short, and none gained from it. PASSBAND_POSTGRES_JIT=on turns it back on.
    jit = "on" if os.environ.get("PASSBAND_POSTGRES_JIT", "off") == "on" else "off"
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = f"-c jit={jit}"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Covering indexes (INCLUDE) are a PostgreSQL feature; SQLite, the embedded default, ignores them.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# Serve straight from static/ too, so a server works before (or without) collectstatic.
WHITENOISE_USE_FINDERS = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
MEDIA_ROOT = VAR_DIR / "media"
# Uploads waiting for their import, release files and repository snapshots go through Django's storage API
# (curation/files.py): the filesystem under MEDIA_ROOT by default, or an S3-compatible bucket so that workers on
# other machines need no shared disk. Credentials come from the standard AWS_ACCESS_KEY_ID and
# AWS_SECRET_ACCESS_KEY variables (boto3's own chain), never from here.
PASSBAND_STORAGE = os.environ.get("PASSBAND_STORAGE", "filesystem")
if PASSBAND_STORAGE == "s3":
    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ.get("PASSBAND_S3_BUCKET", "passband"),
            "endpoint_url": os.environ.get("PASSBAND_S3_ENDPOINT_URL") or None,
            "region_name": os.environ.get("PASSBAND_S3_REGION") or None,
            "location": os.environ.get("PASSBAND_S3_PREFIX", ""),
            "file_overwrite": False,
            "default_acl": None,
            "signature_version": "s3v4",
        },
    }
elif PASSBAND_STORAGE != "filesystem":
    raise ImproperlyConfigured(f"PASSBAND_STORAGE is {PASSBAND_STORAGE!r}: use filesystem or s3.")
# Release downloads as redirects to signed URLs of the bucket (the bytes skip the web process); the bucket's
# endpoint must then be reachable by whoever downloads. Off: the web process streams them.
PASSBAND_STORAGE_SIGNED_DOWNLOADS = env_bool("PASSBAND_STORAGE_SIGNED_DOWNLOADS", False) and PASSBAND_STORAGE == "s3"
PASSBAND_STORAGE_URL_SECONDS = int(os.environ.get("PASSBAND_STORAGE_URL_SECONDS", "300"))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "environment_list"
LOGOUT_REDIRECT_URL = "login"

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    SECURE_CONTENT_TYPE_NOSNIFF = True

# Uploads: the import reads files itself, so Django's own limit is kept just above ours.
PASSBAND_MAX_UPLOAD_BYTES = int(os.environ.get("PASSBAND_MAX_UPLOAD_BYTES", str(64 * 1024 * 1024)))
PASSBAND_MAX_LINE_BYTES = int(os.environ.get("PASSBAND_MAX_LINE_BYTES", str(1024 * 1024)))
# Uploads larger than this import in the background (a Celery job with a progress page); smaller
# ones import within the request; the worker reads the stored upload through the storage API.
PASSBAND_IMPORT_INLINE_BYTES = int(os.environ.get("PASSBAND_IMPORT_INLINE_BYTES", str(1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024

# Default thresholds for new environments; each environment keeps its own.
PASSBAND_FLOOR = env_float("PASSBAND_FLOOR", 0.02)
PASSBAND_RETIRE = env_float("PASSBAND_RETIRE", 0.70)
if not 0 < PASSBAND_FLOOR < PASSBAND_RETIRE < 1:
    raise ImproperlyConfigured("Need 0 < PASSBAND_FLOOR < PASSBAND_RETIRE < 1.")

# Calibration (see docs/calibration.md).
# A task whose verifier errors or times out on more than this share of verdicts is flagged, not called hard.
PASSBAND_VERIFIER_TROUBLE_SHARE = env_float("PASSBAND_VERIFIER_TROUBLE_SHARE", 0.2)
# Calibrated tasks (per environment and probe model) needed before an empirical-Bayes prior replaces
# Jeffreys; 0 keeps Jeffreys always.
PASSBAND_PRIOR_MIN_TASKS = int(os.environ.get("PASSBAND_PRIOR_MIN_TASKS", "30"))
# Tasks with evidence (per environment and probe model) needed before the adaptive policy probes
# with a stopping table learned from the environment's own population (docs/prediction.md);
# 0 keeps the calibrated rule always.
PASSBAND_LEARNED_MIN_TASKS = int(os.environ.get("PASSBAND_LEARNED_MIN_TASKS", "1000"))
# Let that learned policy be a mixture of two tables, a share of tasks (fixed by id) on each
# (stats.learned_table(mixture=True)); off: on a 1,000-task fit it can break a slice limit
# (docs/benchmarks-calibration.md, "Learned tables").
PASSBAND_LEARNED_MIXTURE = os.environ.get("PASSBAND_LEARNED_MIXTURE", "0") == "1"
# Campaign and task pages warn when more than this share of generated rollouts hit the completion
# budget (finish reason "length"): they were graded as they stood, so raise max new tokens.
PASSBAND_TRUNCATION_WARN_SHARE = env_float("PASSBAND_TRUNCATION_WARN_SHARE", 0.10)

# Near-duplicates and contamination (similarity/, engine/similarity.py; see docs/similarity.md). A task
# is a near-duplicate when another task with the same numbers has MinHash Jaccard >= the first or
# embedding cosine >= the second; contaminated when >= the overlap share of its word 13-grams is in
# one benchmark item, or its embedding is that close to one.
PASSBAND_DUPLICATE_JACCARD = env_float("PASSBAND_DUPLICATE_JACCARD", 0.6)
PASSBAND_DUPLICATE_COSINE = env_float("PASSBAND_DUPLICATE_COSINE", 0.85)
PASSBAND_CONTAMINATION_OVERLAP = env_float("PASSBAND_CONTAMINATION_OVERLAP", 0.2)
PASSBAND_CONTAMINATION_COSINE = env_float("PASSBAND_CONTAMINATION_COSINE", 0.92)
# Trainer feedback: evidence k checkpoints older than the latest counts discount**k.
PASSBAND_FEEDBACK_DISCOUNT = env_float("PASSBAND_FEEDBACK_DISCOUNT", 0.5)
# Feedback retires a task when P(pass rate in the retire band) reaches this.
PASSBAND_FEEDBACK_CONFIDENCE = env_float("PASSBAND_FEEDBACK_CONFIDENCE", 0.95)
# Beat: the chance that each too-hard or retired task is re-probed in one daily run, and that run's cap.
PASSBAND_REPROBE_PROBABILITY = env_float("PASSBAND_REPROBE_PROBABILITY", 0.02)
PASSBAND_REPROBE_CAP = int(os.environ.get("PASSBAND_REPROBE_CAP", "64"))
# Samples the model server failed to give (down, refusing, timing out) are asked for again after a
# pause that doubles up to this many seconds, for as long as the campaign runs.
PASSBAND_SERVER_RETRY_MAX_S = env_float("PASSBAND_SERVER_RETRY_MAX_S", 60.0)
# The inline runner (manage.py calibrate): how long a round waits for a server that fails before the
# command stops, leaving the campaign running for a later run or the workers to finish.
PASSBAND_INLINE_SERVER_WAIT_S = env_float("PASSBAND_INLINE_SERVER_WAIT_S", 300.0)
# Task versions per generate/verify job when a server samples and the verifier is cheap: the broker
# messages and queries of a job are shared by all of them (see calibration.services.tasks_per_job).
PASSBAND_TASKS_PER_JOB = int(os.environ.get("PASSBAND_TASKS_PER_JOB", "32"))
# Jobs each running campaign keeps queued; each finished job queues the next. A window, not the whole
# campaign, sits in the broker: a cancelled campaign leaves at most this many jobs to discard, and two
# campaigns share the workers instead of one waiting behind the other. Keep it above the number of
# generate worker processes.
PASSBAND_JOBS_PER_CAMPAIGN = int(os.environ.get("PASSBAND_JOBS_PER_CAMPAIGN", "16"))

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

# Judges checked against people (docs/verifiers.md): every PASSBAND_JUDGE_SAMPLE_EVERY seconds, a
# deterministic PASSBAND_JUDGE_SAMPLE_SHARE of judged rollouts (ranked by sha256 of the seed, judge,
# prompt version and rollout id), at most PASSBAND_JUDGE_SAMPLE_LIMIT per judge and prompt version,
# goes to reviewers blind. A judge's page warns when its false-pass rate is above the limit.
PASSBAND_JUDGE_SAMPLE_SHARE = env_float("PASSBAND_JUDGE_SAMPLE_SHARE", 0.05)
PASSBAND_JUDGE_SAMPLE_LIMIT = int(os.environ.get("PASSBAND_JUDGE_SAMPLE_LIMIT", "200"))
PASSBAND_JUDGE_SAMPLE_SEED = int(os.environ.get("PASSBAND_JUDGE_SAMPLE_SEED", "0"))
PASSBAND_JUDGE_SAMPLE_EVERY = env_float("PASSBAND_JUDGE_SAMPLE_EVERY", 3600.0)
PASSBAND_JUDGE_FALSE_PASS_LIMIT = env_float("PASSBAND_JUDGE_FALSE_PASS_LIMIT", 0.05)
# The weak-test check of code tasks (curation/weak_tests.py, docs/verifiers.md "Weak tests"): at most
# PASSBAND_WEAK_TESTS_MUTANTS mutants of the reference a task at import (0: not at import), flagged when more
# than PASSBAND_WEAK_TESTS_LIMIT of them survive the task's tests.
PASSBAND_WEAK_TESTS_MUTANTS = int(os.environ.get("PASSBAND_WEAK_TESTS_MUTANTS", "20"))
PASSBAND_WEAK_TESTS_LIMIT = env_float("PASSBAND_WEAK_TESTS_LIMIT", 0.5)
if not 0 <= PASSBAND_WEAK_TESTS_MUTANTS <= 200 or not 0 <= PASSBAND_WEAK_TESTS_LIMIT <= 1:
    raise ImproperlyConfigured("Need 0 <= PASSBAND_WEAK_TESTS_MUTANTS <= 200 and 0 <= PASSBAND_WEAK_TESTS_LIMIT <= 1.")
# The team's review workbench (docs/review.md): a claim on a queue task lasts PASSBAND_CLAIM_MINUTES;
# a deterministic PASSBAND_DOUBLE_REVIEW_SHARE of approved or rejected task versions (ranked by sha256 of
# the seed and the version id) waits for a second, blind reviewer before the decision takes effect
# (0 by default: a team turns it on, 0.1 is a usual share).
PASSBAND_CLAIM_MINUTES = env_float("PASSBAND_CLAIM_MINUTES", 120.0)
PASSBAND_DOUBLE_REVIEW_SHARE = env_float("PASSBAND_DOUBLE_REVIEW_SHARE", 0.0)
PASSBAND_DOUBLE_REVIEW_SEED = int(os.environ.get("PASSBAND_DOUBLE_REVIEW_SEED", "0"))
if PASSBAND_CLAIM_MINUTES <= 0 or not 0 <= PASSBAND_DOUBLE_REVIEW_SHARE <= 1:
    raise ImproperlyConfigured("Need PASSBAND_CLAIM_MINUTES > 0 and 0 <= PASSBAND_DOUBLE_REVIEW_SHARE <= 1.")
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

# Generation speed assumed for a probe model with no rollouts yet, to estimate a probe's time and, for
# a model priced by the GPU-hour, its cost (calibration/costs.py). Output tokens per second.
PASSBAND_ESTIMATE_TOKENS_PER_SECOND = float(os.environ.get("PASSBAND_ESTIMATE_TOKENS_PER_SECOND", "50"))
# The longest an in-process model may take to load (read, convert, to its device) before its first
# sample, in the range a first probe's estimate states.
PASSBAND_ESTIMATE_LOAD_SECONDS = float(os.environ.get("PASSBAND_ESTIMATE_LOAD_SECONDS", "600"))

# Where converted model weights are cached (see engine/backends).
PASSBAND_MODEL_CACHE = os.environ.get("PASSBAND_MODEL_CACHE", "")

# Celery. Unset broker: a filesystem transport under var/, which needs no server: kombu's, made safe for several
# processes (passband/broker.py: messages written whole, and kept in flight until acknowledged).
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL in ("filesystem://", "passband-filesystem://"):
    CELERY_BROKER_URL = "passband-filesystem://"
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("queue", "control", "in-flight"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "control_folder": str(_broker_dir / "control"),  # kombu's default is ./control, in the working directory
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "store_processed": False,
        # kombu polls the folder once a second by default, and a worker waits a poll between jobs.
        "polling_interval": 0.1,
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A killed worker must lose nothing: acknowledge after the work, redeliver if the worker died.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A cold shutdown (a second signal, or SIGQUIT) gives the job in hand 10 s, then ends it: its message
# is handed out again (acks late), so nothing is lost, and stopping never hangs on a long job.
CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT = env_float("CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT", 10.0)
CELERY_WORKER_ENABLE_SOFT_SHUTDOWN_ON_IDLE = True
CELERY_TASK_SOFT_TIME_LIMIT = 600
CELERY_TASK_TIME_LIMIT = 660
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "calibration.tasks.generate_*": {"queue": "generate"},
    "calibration.tasks.verify_*": {"queue": "verify"},
    # The sentence model loads once in each process that takes these: keep them off the campaign queues.
    "similarity.tasks.*": {"queue": "similarity"},
}

# Content Security Policy: scripts only from this site (no inline script, no eval), so text that
# slips past the Markdown sanitiser still cannot run. Inline styles stay: plotly and KaTeX set them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# The largest JSON body the API reads; larger ones are refused with a 400 before parsing.
PASSBAND_API_MAX_BODY_BYTES = int(env_float("PASSBAND_API_MAX_BODY_BYTES", 10 * 1024 * 1024))
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.ApiTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "api.pagination.StrictCursorPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Keyed by API token (see accounts.authentication.TokenRateThrottle): each token gets its own budget.
    "DEFAULT_THROTTLE_CLASSES": ["accounts.authentication.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "token": os.environ.get("PASSBAND_API_RATE", "6000/hour"),
        "feedback": os.environ.get("PASSBAND_FEEDBACK_RATE", "600/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Passband API",
    "DESCRIPTION": "Tasks with their measured pass rate, releases in every trainer's format, grading.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs describe the API, they reveal no data: trainers read them without a token.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Swagger UI from the drf-spectacular-sidecar package: the docs page works offline, no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# Beat: re-queue campaign rounds that stalled. The database, not the broker, knows what is left to do, and the
# workers say what they are at: a worker holds a lease on the round it works on, renewed by a heartbeat thread
# every third of PASSBAND_ROUND_LEASE_S while the job runs, however long a generation takes. Every
# PASSBAND_RECONCILE_EVERY seconds, rounds whose lease ran out (their worker died) are queued again, once each;
# so are rounds queued PASSBAND_STALLED_AFTER seconds ago with no lease, when no lease is live anywhere (no worker
# is at work, so their message was lost). A round waiting behind others, or generating slowly, is never re-queued.
PASSBAND_RECONCILE_EVERY = env_float("PASSBAND_RECONCILE_EVERY", 60.0)
PASSBAND_STALLED_AFTER = env_float("PASSBAND_STALLED_AFTER", 300.0)
PASSBAND_ROUND_LEASE_S = env_float("PASSBAND_ROUND_LEASE_S", 90.0)
CELERY_BEAT_SCHEDULE = {
    "reconcile-campaigns": {"task": "calibration.tasks.reconcile_campaigns", "schedule": PASSBAND_RECONCILE_EVERY},
    # Some too-hard and retired tasks revive: re-probe a small random share of them once a day.
    "reprobe-sample": {"task": "calibration.tasks.reprobe_sample", "schedule": 86400.0},
    "draw-judge-samples": {"task": "calibration.tasks.draw_judge_samples", "schedule": PASSBAND_JUDGE_SAMPLE_EVERY},
    # Environment health is read over the last hour; older minutes are kept a while for a look back, then dropped.
    "prune-episode-health": {"task": "calibration.tasks.prune_episode_health", "schedule": 86400.0},
}
PASSBAND_HEALTH_KEEP_DAYS = env_float("PASSBAND_HEALTH_KEEP_DAYS", 7.0)
# Redis redelivers a message whose worker died without acknowledging it after this many seconds.
# kombu looks for such messages only every interval x throttle seconds (100 s by default) and
# locks the sweep for 300 s: scale both to the timeout so redelivery follows it closely.
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    _visibility_timeout = int(os.environ.get("PASSBAND_VISIBILITY_TIMEOUT", "1800"))
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _visibility_timeout,
        "unacked_restore_interval": max(1, min(60, _visibility_timeout // 4)),
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": max(5, min(300, _visibility_timeout)),
    }

# A shared cache (Redis) makes per-token rate limits hold across processes and machines.
# Sessions are read from it too (written through to the database): one query fewer on every page. Only with
# a shared cache: a per-process cache would keep a session alive in one process after logout in another.
if os.environ.get("CACHE_URL"):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["CACHE_URL"]}
    }
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

# API task pages kept this many seconds and served again to the same user asking for the same URL, with an
# Age header (api.views.base.SharedPages); 0 keeps none. Compose: 5. Best with a shared cache (CACHE_URL).
PASSBAND_API_PAGE_SECONDS = int(os.environ.get("PASSBAND_API_PAGE_SECONDS", "0"))
