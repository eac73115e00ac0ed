"""Celery tasks for releases: thin wrappers that load by id, call one service and are safe to run twice."""

from celery import shared_task
from django.db import OperationalError

from releases import services


@shared_task(
    bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=1800, time_limit=1860, max_retries=5
)
def build_release(self, release_id: int) -> str:
    """Write a release's files; a release already built is left as it is.

    A build that fails ends `failed` with its reason and can be retried (release_retry). A database
    busy for a moment (the embedded SQLite under load) is tried again a few times first.
    """
    try:
        return services.release_build(release_id=release_id).status
    except OperationalError as error:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=error, countdown=5 * 2**self.request.retries) from error
        services.release_mark_failed(release_id=release_id, reason=f"the database stayed busy: {error}")
        raise
