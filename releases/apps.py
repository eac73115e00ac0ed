from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, shell, tests), not only in workers:
        # services queue them by name.
        from releases import tasks  # noqa: F401
