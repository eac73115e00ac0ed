"""Who sees which tasks: reviewers and staff all, trainers what they may train on, authors their own."""

import pytest

from accounts.services import api_token_create
from curation.models import Task, TaskStatus
from curation.policy import tasks_visible_to
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(arithmetic, alice):
    import_tasks(
        arithmetic,
        alice,
        *[
            math_task(status.value, question=f"What is {i} + 1?", answer=str(i + 1))
            for i, status in enumerate(TaskStatus)
        ],
    )
    for status in TaskStatus:
        Task.objects.filter(key=status.value).update(status=status)


def keys(user):
    return sorted(tasks_visible_to(user).values_list("key", flat=True))


def test_each_role_sees_its_share(corpus, alice, bob, charlie, staff, django_user_model):
    everything = sorted(status.value for status in TaskStatus)
    assert keys(bob) == everything and keys(staff) == everything
    assert keys(charlie) == ["active", "approved", "retired"]
    assert keys(alice) == everything  # her own
    other = django_user_model.objects.create_user(username="erin", password="x")
    assert keys(other) == ["active", "approved"]


def test_a_trainer_cannot_page_drafts_over_the_api(client, corpus, charlie):
    _, secret = api_token_create(user=charlie, name="t", scopes=["read"])
    body = client.get("/api/v1/tasks", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert sorted(row["key"] for row in body["results"]) == ["active", "approved", "retired"]


def test_the_object_check_agrees_with_the_queryset(corpus, alice, bob, charlie, staff, django_user_model):
    from django.contrib.auth.models import AnonymousUser

    from curation.policy import task_may_see

    other = django_user_model.objects.create_user(username="erin", password="x")
    for user in (alice, bob, charlie, staff, other, AnonymousUser()):
        by_object = sorted(task.key for task in Task.objects.all() if task_may_see(user, task))
        assert by_object == keys(user), user
