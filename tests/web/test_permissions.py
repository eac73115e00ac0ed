"""Every page and action with three users, one of whom is refused (403 or 404).

alice authors the task, bob reviews, charlie trains (API only), dora is another author.
Each refused case also checks that nothing changed, so the test fails if the guard goes.
"""

from unittest import mock

import pytest
from django.urls import reverse

from calibration.models import Campaign, ProbeModel
from curation.models import Comment, TaskStatus
from curation.services import task_transition
from review.models import Review
from tests.conftest import make_user
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def dora(django_user_model):
    """Another author."""
    return make_user(django_user_model, "dora", "authors")


@pytest.fixture
def task(alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    return arithmetic.tasks.get(key="t-1")


@pytest.fixture
def model(db):
    return ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")


@pytest.fixture
def campaign(alice, arithmetic, task, model):
    return Campaign.objects.create(environment=arithmetic, probe_model=model, created_by=alice, seed=1)


def status_of(client, user, method, url, data=None):
    client.force_login(user)
    response = client.post(url, data or {}) if method == "post" else client.get(url)
    client.logout()
    return response.status_code


PAGES = [
    # (url name, args, allowed users, refused user, refused status)
    ("environment_list", [], ["alice", "bob"], "charlie", 403),
    ("task_list", [], ["alice", "bob"], "charlie", 403),
    ("dashboard", [], ["alice", "bob"], "charlie", 403),
    ("task_upload", [], ["alice", "dora"], "bob", 403),
    ("task_detail", ["arithmetic", "t-1"], ["alice", "bob"], "dora", 404),
    ("task_edit", ["arithmetic", "t-1"], ["alice", "staff"], "dora", 404),
    ("review_queue", [], ["bob", "staff"], "alice", 403),
    ("trajectory_list", [], ["alice", "bob"], "charlie", 403),
]


@pytest.mark.parametrize(("name", "args", "allowed", "refused", "refused_status"), PAGES, ids=[row[0] for row in PAGES])
def test_pages(client, request, task, name, args, allowed, refused, refused_status):
    url = reverse(name, args=args)
    for username in allowed:
        assert status_of(client, request.getfixturevalue(username), "get", url) == 200, username
    assert status_of(client, request.getfixturevalue(refused), "get", url) == refused_status


def test_campaign_page(client, alice, bob, charlie, campaign):
    url = reverse("campaign_detail", args=[campaign.pk])
    assert status_of(client, alice, "get", url) == 200
    assert status_of(client, bob, "get", url) == 200
    assert status_of(client, charlie, "get", url) == 403


def test_histogram_data(client, alice, bob, charlie, arithmetic):
    url = reverse("pass_rate_histogram_data") + "?environment=arithmetic"
    assert status_of(client, alice, "get", url) == 200
    assert status_of(client, bob, "get", url) == 200
    assert status_of(client, charlie, "get", url) == 403


def test_others_approved_tasks_are_read_only_for_authors(client, alice, bob, dora, task):
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    from review.services import review_approve

    review_approve(task=task, reviewer=bob)
    assert status_of(client, dora, "get", reverse("task_detail", args=["arithmetic", "t-1"])) == 200
    assert status_of(client, dora, "get", reverse("task_edit", args=["arithmetic", "t-1"])) == 403
    assert status_of(client, dora, "post", reverse("comment_create", args=["arithmetic", "t-1"]), {"body": "hi"}) == 403
    assert not Comment.objects.exists()
    assert (
        status_of(client, alice, "post", reverse("comment_create", args=["arithmetic", "t-1"]), {"body": "hi"}) == 302
    )
    assert Comment.objects.count() == 1


def test_submit(client, alice, bob, dora, task):
    url = reverse("task_submit", args=["arithmetic", "t-1"])
    assert status_of(client, dora, "post", url) == 404
    assert status_of(client, bob, "post", url) == 403
    task.refresh_from_db()
    assert task.status == TaskStatus.DRAFT
    assert status_of(client, alice, "post", url) == 302
    task.refresh_from_db()
    assert task.status == TaskStatus.SUBMITTED


def test_edit(client, alice, bob, dora, task):
    url = reverse("task_edit", args=["arithmetic", "t-1"])
    data = {"prompt_format": "text", "prompt": "What is 4 + 4?", "answer": "8", "verifier": '{"kind": "math"}'}
    assert status_of(client, dora, "post", url, data) == 404
    assert status_of(client, bob, "post", url, data) == 403
    assert task.versions.count() == 1
    assert status_of(client, alice, "post", url, data) == 302
    assert task.versions.count() == 2


def test_probe_now(client, alice, bob, dora, task, model):
    url = reverse("task_probe", args=["arithmetic", "t-1"])
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        assert status_of(client, dora, "post", url, {"model": "probe"}) == 404
        assert status_of(client, bob, "post", url, {"model": "probe"}) == 403
        assert not Campaign.objects.exists()
        assert status_of(client, alice, "post", url, {"model": "probe"}) == 302
    assert Campaign.objects.count() == 1


def test_environment_probe(client, alice, bob, charlie, task, model):
    url = reverse("environment_probe", args=["arithmetic"])
    with mock.patch("calibration.services.campaigns.campaign_enqueue_pending"):
        assert status_of(client, bob, "post", url, {"model": "probe"}) == 403
        assert status_of(client, charlie, "post", url, {"model": "probe"}) == 403
        assert not Campaign.objects.exists()
        # The first POST shows the estimate; the confirming one starts the campaign.
        assert status_of(client, alice, "post", url, {"model": "probe"}) == 200
        assert not Campaign.objects.exists()
        assert status_of(client, alice, "post", url, {"model": "probe", "confirm": "1"}) == 302
    assert Campaign.objects.count() == 1


def test_probe_model_edit_is_for_staff(client, alice, staff, model):
    url = reverse("probe_model_edit", args=[model.name])
    assert status_of(client, alice, "post", url, {"max_new_tokens": "64"}) == 403
    model.refresh_from_db()
    assert model.max_new_tokens != 64
    assert status_of(client, staff, "post", url, {"max_new_tokens": "64", "temperature": "0.5"}) == 302
    model.refresh_from_db()
    assert (model.max_new_tokens, model.temperature) == (64, 0.5)


def test_campaign_control(client, alice, bob, dora, campaign):
    url = reverse("campaign_control", args=[campaign.pk, "pause"])
    assert status_of(client, bob, "post", url) == 403
    status_of(client, dora, "post", url)  # another author: refused with a message, nothing changes
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.RUNNING
    assert status_of(client, alice, "post", url) == 302
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.PAUSED


@pytest.mark.parametrize("action", ["claim", "approve", "reject", "send_back"])
def test_review_actions(client, alice, bob, charlie, task, action):
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    url = reverse("review_action", args=["arithmetic", "t-1", action])
    data = {"comment": "because"}
    assert status_of(client, alice, "post", url, data) == 403
    assert status_of(client, charlie, "post", url, data) == 403
    task.refresh_from_db()
    assert task.status == TaskStatus.SUBMITTED
    assert status_of(client, bob, "post", url, data) == 302
    task.refresh_from_db()
    expected = {"claim": "in_review", "approve": "approved", "reject": "rejected", "send_back": "changes_requested"}
    assert task.status == expected[action]


def test_bulk_review(client, alice, bob, charlie, task):
    task_transition(task=task, to_status=TaskStatus.SUBMITTED, by=alice)
    url = reverse("review_bulk")
    assert status_of(client, alice, "post", url, {"decision": "approve"}) == 403
    assert status_of(client, charlie, "post", url, {"decision": "approve"}) == 403
    assert not Review.objects.exists()
    assert status_of(client, bob, "post", url, {"decision": "approve"}) == 302
    assert Review.objects.get().reviewer == bob


def test_comment_create(client, alice, bob, dora, task):
    url = reverse("comment_create", args=["arithmetic", "t-1"])
    assert status_of(client, dora, "post", url, {"body": "mine?"}) == 404
    assert not Comment.objects.exists()
    assert status_of(client, alice, "post", url, {"body": "note"}) == 302
    assert status_of(client, bob, "post", url, {"body": "review note"}) == 302
    assert Comment.objects.count() == 2


def test_comment_resolve(client, alice, bob, dora, task):
    comment = Comment.objects.create(task=task, author=bob, body="fix the wording")
    url = reverse("comment_resolve", args=[comment.pk])
    assert status_of(client, dora, "post", url) == 404
    comment.refresh_from_db()
    assert comment.resolved_at is None
    assert status_of(client, alice, "post", url) == 302
    comment.refresh_from_db()
    assert comment.resolved_by == alice


def test_admin_is_staff_only(client, alice, bob, staff):
    assert status_of(client, staff, "get", reverse("admin:index")) == 200
    assert status_of(client, alice, "get", reverse("admin:index")) == 302
    assert status_of(client, bob, "get", reverse("admin:index")) == 302


def test_navigation_shows_each_role_its_pages(client, alice, bob):
    client.force_login(alice)
    page = client.get(reverse("environment_list")).content.decode()
    assert 'href="/tasks/upload/"' in page and 'href="/review/"' not in page
    client.force_login(bob)
    page = client.get(reverse("environment_list")).content.decode()
    assert 'href="/review/"' in page and 'href="/tasks/upload/"' not in page
