"""Passband settings: everything that differs between machines comes from the environment.

Unset DATABASE_URL and CELERY_BROKER_URL give the embedded defaults (a SQLite file and a
filesystem broker under var/), so a laptop needs no servers; production sets both. Django's own
settings are here; Passband's, grouped by concern, in passband/settings_parts/.
"""

import os

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from passband.settings_parts.calibration import *  # noqa: F403
from passband.settings_parts.celery import *  # noqa: F403
from passband.settings_parts.env import BASE_DIR, VAR_DIR, env_bool, env_float, env_list
from passband.settings_parts.outside import *  # noqa: F403

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
    "review",
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
CELERY_TIMEZONE = TIME_ZONE
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
LOGIN_REDIRECT_URL = "landing"  # web/views/sign_in.py: by role
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

# The team's review workbench (docs/review.md): a claim on a queue task lasts PASSBAND_CLAIM_MINUTES;
# a deterministic PASSBAND_DOUBLE_REVIEW_SHARE of approved or rejected task versions (ranked by sha256 of
# the seed and the version id) waits for a second, blind reviewer before the decision takes effect
# (0 by default: a team turns it on, 0.1 is a usual share).
PASSBAND_CLAIM_MINUTES = env_float("PASSBAND_CLAIM_MINUTES", 120.0)
PASSBAND_DOUBLE_REVIEW_SHARE = env_float("PASSBAND_DOUBLE_REVIEW_SHARE", 0.0)
PASSBAND_DOUBLE_REVIEW_SEED = int(os.environ.get("PASSBAND_DOUBLE_REVIEW_SEED", "0"))
if PASSBAND_CLAIM_MINUTES <= 0 or not 0 <= PASSBAND_DOUBLE_REVIEW_SHARE <= 1:
    raise ImproperlyConfigured("Need PASSBAND_CLAIM_MINUTES > 0 and 0 <= PASSBAND_DOUBLE_REVIEW_SHARE <= 1.")

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
