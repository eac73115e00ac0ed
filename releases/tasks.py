"""Celery tasks for releases: thin wrappers that load by id, call one service and are safe to run twice."""

from celery import shared_task

from releases import services


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=1800, time_limit=1860)
def build_release(release_id: int) -> str:
    """Write a release's files; a release already built is left as it is."""
    return services.release_build(release_id=release_id).status
