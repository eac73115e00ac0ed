from django.apps import AppConfig


class SimilarityConfig(AppConfig):
    name = "similarity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the Celery tasks in every process (web, shell, tests), not only in workers:
        # curation queues the indexing by name after an upload commits.
        from similarity import tasks  # noqa: F401
