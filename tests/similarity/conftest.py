"""Similarity checks run for real (the packaged sentence model, datasketch MinHash) in the test process."""

import pytest
from celery import current_app


@pytest.fixture
def eager():
    """Queued Celery tasks run inline, so an upload's after-commit check finishes before the test looks."""
    saved = current_app.conf.task_always_eager, current_app.conf.task_eager_propagates
    current_app.conf.task_always_eager = current_app.conf.task_eager_propagates = True
    yield
    current_app.conf.task_always_eager, current_app.conf.task_eager_propagates = saved
