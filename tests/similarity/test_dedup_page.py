"""The near-duplicate clusters page: reviewers keep one task, the others leave the corpus by the status rules."""

import pytest
from django.urls import reverse

from curation.models import Task, TaskStatus
from review.models import Review
from similarity import services
from similarity.models import SimilarityFlag
from tests.factories import import_tasks
from tests.similarity.texts import APPLES, TRAIN, TRAIN_PARAPHRASE, task

pytestmark = pytest.mark.django_db

TRAIN_SECOND_PARAPHRASE = "A train sets off from the station at 3 pm at 60 miles per hour. How far has it gone by 5 pm?"


@pytest.fixture
def cluster(arithmetic, alice):
    """Three wordings of one problem (approved, in review, draft) and one unrelated task, all checked."""
    import_tasks(
        arithmetic,
        alice,
        task("train", TRAIN),
        task("train-again", TRAIN_PARAPHRASE),
        task("train-draft", TRAIN_SECOND_PARAPHRASE),
        task("apples", APPLES, "8"),
    )
    Task.objects.filter(key="train").update(status=TaskStatus.APPROVED)
    Task.objects.filter(key="train-again").update(status=TaskStatus.IN_REVIEW)
    services.versions_index()
    return {task.key: task for task in Task.objects.select_related("current_version")}


def keep(client, version_id: int, shown=None):
    """Post the keep form as the page draws it: the chosen version and every version it showed."""
    if shown is None:
        shown = SimilarityFlag.objects.values_list("task_version_id", flat=True).distinct()
    return client.post(reverse("dedup_keep_one"), {"keep": version_id, "shown": list(shown)}, follow=True)


def test_reviewer_sees_the_cluster_and_keeps_one(client, cluster, bob):
    client.force_login(bob)
    page = client.get(reverse("dedup_clusters")).content.decode()
    assert 'data-size="3"' in page
    assert all(key in page for key in ("arithmetic/train<", "arithmetic/train-again<", "arithmetic/train-draft<"))
    assert "arithmetic/apples" not in page

    response = keep(client, cluster["train"].current_version_id)
    assert response.status_code == 200
    statuses = dict(Task.objects.values_list("key", "status"))
    assert statuses["train"] == TaskStatus.APPROVED
    assert statuses["train-again"] == TaskStatus.REJECTED  # in review: rejected, with a review on record
    assert statuses["train-draft"] == TaskStatus.DRAFT  # its author's draft: refused, said why
    assert Review.objects.get(task=cluster["train-again"]).comment == "near-duplicate of arithmetic/train (kept)"
    text = response.content.decode()
    assert "rejected arithmetic/train-again" in text and "arithmetic/train-draft: it is draft" in text
    # The draft's link stays open; the kept and rejected tasks' link is resolved.
    open_flags = SimilarityFlag.objects.filter(kind="near_duplicate", resolved_at__isnull=True)
    assert all(cluster["train-draft"].current_version_id in (f.task_version_id, f.neighbour_id) for f in open_flags)
    assert SimilarityFlag.objects.filter(resolved_by=bob).exists()


def test_keeping_the_newer_one_retires_the_approved_one(client, cluster, bob):
    client.force_login(bob)
    keep(client, cluster["train-again"].current_version_id)
    assert Task.objects.get(key="train").status == TaskStatus.RETIRED
    assert Task.objects.get(key="train").status_changes.last().changed_by == bob


def test_keep_one_takes_out_only_what_the_page_showed(client, cluster, bob):
    client.force_login(bob)
    shown = [cluster[key].current_version_id for key in ("train", "train-again")]  # train-draft joined later
    Task.objects.filter(key="train-draft").update(status=TaskStatus.APPROVED)
    keep(client, cluster["train"].current_version_id, shown=shown)
    statuses = dict(Task.objects.values_list("key", "status"))
    assert statuses["train-again"] == TaskStatus.REJECTED and statuses["train-draft"] == TaskStatus.APPROVED


@pytest.mark.parametrize("user", ["alice", "charlie"])
def test_only_reviewers_may_see_or_resolve_clusters(client, cluster, user, request):
    client.force_login(request.getfixturevalue(user))
    assert client.get(reverse("dedup_clusters")).status_code == 403
    assert keep(client, cluster["train"].current_version_id).status_code == 403
    assert client.post(reverse("dedup_recheck")).status_code == 403
    assert Task.objects.get(key="train-again").status == TaskStatus.IN_REVIEW


def test_anonymous_is_sent_to_log_in(client, cluster):
    response = client.get(reverse("dedup_clusters"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_version_outside_any_cluster_is_refused(client, cluster, bob):
    client.force_login(bob)
    response = keep(client, cluster["apples"].current_version_id)
    assert "not in an open near-duplicate cluster" in response.content.decode()
    assert Task.objects.get(key="train-again").status == TaskStatus.IN_REVIEW


def test_review_queue_shows_the_neighbour_side_by_side_and_filters(client, cluster, bob):
    client.force_login(bob)
    page = client.get(reverse("review_queue"), {"flag": "near_duplicate"}).content.decode()
    assert 'data-key="train-again"' in page and "Its neighbour" in page
    assert TRAIN in page and TRAIN_PARAPHRASE in page
    assert client.get(reverse("review_queue"), {"flag": "contaminated"}).context["total"] == 0


def test_recheck_button_queues_a_check(client, cluster, bob, django_capture_on_commit_callbacks):
    client.force_login(bob)
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("dedup_recheck"), {"environment": "arithmetic"}, follow=True)
    assert len(queued) == 1 and "again in the background" in response.content.decode()


def test_not_duplicates_resolves_the_flags_and_changes_no_task(client, cluster, bob, alice):
    client.force_login(alice)
    response = client.post(reverse("dedup_dismiss"), {"keep": cluster["train"].current_version_id})
    assert response.status_code == 403
    client.force_login(bob)
    statuses = dict(Task.objects.values_list("key", "status"))
    response = client.post(reverse("dedup_dismiss"), {"keep": cluster["train"].current_version_id}, follow=True)
    assert "as not duplicates" in response.content.decode()
    assert dict(Task.objects.values_list("key", "status")) == statuses
    assert not SimilarityFlag.objects.filter(kind="near_duplicate", resolved_at__isnull=True).exists()
    assert "No open near-duplicate clusters" in client.get(reverse("dedup_clusters")).content.decode()
    services.versions_index(recheck=True)  # a recheck keeps a reviewer's resolution
    assert not SimilarityFlag.objects.filter(kind="near_duplicate", resolved_at__isnull=True).exists()
