"""Celery tasks for similarity: thin wrappers that load by id, call one service and are safe to run twice."""

from celery import shared_task

from similarity import services


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=3600, time_limit=3660)
def index_versions(environment_id: int | None = None, recheck: bool = False) -> str:
    """Sign and check the new versions of an environment (every environment when None)."""
    return services.versions_index(environment_id=environment_id, recheck=recheck).summary()
