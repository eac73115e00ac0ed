from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Services queue Celery tasks by name; a web process must have registered them too.
        from releases import tasks  # noqa: F401
