from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, shell, tests), not only in workers:
        # services queue them by name.
        from curation import tasks  # noqa: F401
        from curation.repo_snapshots import snapshot_read
        from engine.repo_tasks import snapshots

        # The repo_tests verifier reads repository snapshots through Django's storage.
        snapshots.configure_store(snapshot_read)
        # Registering a remote server, and every change of where it is or which secret it is sent, is in the
        # audit log with before and after, whatever path made it (accounts.audit_changes).
        from accounts.audit_changes import watch
        from curation.models import McpServer

        watch(McpServer, exclude=("tools", "checked_at", "created_at"))
