from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "calibration"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Services queue Celery tasks by name; a web process must have registered them too.
        from calibration import tasks  # noqa: F401
