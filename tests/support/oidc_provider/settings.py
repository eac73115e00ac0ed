"""A real OpenID Connect provider for the suite: django-oauth-toolkit in its own process (serve.py), with
its own database and its own RSA key, so Passband's sign-in is tested against code Passband did not write."""

import os

SECRET_KEY = "oidc-provider-test-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(os.path.dirname(__file__), "templates")],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# Passband's cookies live on the same host (another port): the provider's must not overwrite them.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": os.environ["OIDC_PROVIDER_KEY"],
    "SCOPES": {"openid": "OpenID Connect", "email": "email", "profile": "profile", "groups": "groups"},
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.validator.PeopleValidator",
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
}
