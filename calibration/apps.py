from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    name = "calibration"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, shell, tests), not only in workers:
        # services queue them by name.
        # A probe model's endpoint, key variable and every other setting are in the audit log on every change
        # (accounts.audit_changes), whatever path made it.
        from accounts.audit_changes import watch
        from calibration import tasks  # noqa: F401
        from calibration.models import ProbeModel

        watch(ProbeModel, exclude=("created_at",))
