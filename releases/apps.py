from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    default_auto_field = "django.db.models.BigAutoField"
