from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "calibration"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, shell, tests), not only in workers:
        # services queue them by name.
        from calibration import tasks  # noqa: F401
