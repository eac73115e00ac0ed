"""Comments over the API as on the pages: threads and replies, @mentions that notify the person in the
app (never someone who may not see the task), and the caller's notifications.

alice authors, bob and dora review, charlie trains (may not see alice's draft).
"""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from review import services as review_services
from review.models import Notification
from review.notifications import mentioned_usernames
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


def bearer(user, *scopes):
    return {"HTTP_AUTHORIZATION": "Bearer " + api_token_create(user=user, name="t", scopes=list(scopes))[1]}


@pytest.fixture
def draft(arithmetic, alice):
    import_tasks(arithmetic, alice, math_task("t-1"))
    return arithmetic.tasks.get(key="t-1")


def test_mentions_are_parsed_once_each():
    body = "@bob look; cc @dora.smith and @bob again, not me@example.com"
    assert mentioned_usernames(body) == ["bob", "dora.smith"]


def test_a_comment_over_the_api_notifies_who_it_mentions(client, alice, bob, dora, charlie, draft):
    answer = client.post(
        reverse("api_comment_create"),
        {"environment": "arithmetic", "key": "t-1", "body": "@bob @dora @charlie @alice @nobody is 5 right?"},
        content_type="application/json",
        **bearer(alice, "curate"),
    )
    assert answer.status_code == 201, answer.content
    # charlie (trainer) may not see a draft: no notification, nothing leaked; alice wrote it herself.
    assert answer.json()["notified"] == ["bob", "dora"]
    root = answer.json()["id"]
    reply = client.post(
        reverse("api_comment_create"),
        {"environment": "arithmetic", "key": "t-1", "body": "yes, @alice", "parent": root},
        content_type="application/json",
        **bearer(bob, "curate"),
    )
    assert reply.status_code == 201 and reply.json()["parent"] == root and reply.json()["notified"] == ["alice"]
    listed = client.get(reverse("api_task_comments", args=["arithmetic", "t-1"]), **bearer(dora, "read")).json()
    assert [(row["author"], row["parent"]) for row in listed] == [("alice", None), ("bob", root)]
    mine = client.get(reverse("api_notification_list") + "?unread=1", **bearer(dora, "read")).json()
    assert [(row["actor"], row["task"], row["kind"]) for row in mine] == [("alice", "arithmetic/t-1", "mention")]
    read = client.post(reverse("api_notification_read"), {}, content_type="application/json", **bearer(dora, "read"))
    assert read.json() == {"marked_read": 1}
    assert client.get(reverse("api_notification_list") + "?unread=1", **bearer(dora, "read")).json() == []


def test_who_may_comment_over_the_api(client, alice, bob, charlie, draft):
    data = {"environment": "arithmetic", "key": "t-1", "body": "hi"}
    # A trainer's token has no curate scope; a read token may not comment; an unseen task is 404.
    assert client.post(reverse("api_comment_create"), data, **bearer(alice, "read")).status_code == 403
    assert (
        client.get(reverse("api_task_comments", args=["arithmetic", "t-1"]), **bearer(charlie, "read")).status_code
        == 404
    )
    empty = client.post(
        reverse("api_comment_create"), {**data, "body": "  "}, content_type="application/json", **bearer(bob, "curate")
    )
    assert empty.status_code == 400


def test_a_mention_on_the_page_shows_in_the_top_bar_until_read(client, alice, bob, draft):
    review_services.comment_add(task=draft, author=alice, body="@bob please look")
    client.force_login(bob)
    page = client.get(reverse("notification_list")).content.decode()
    assert 'id="unread-count">1<' in page and "mentioned you on" in page and "please look" in page
    client.post(reverse("notification_list"))
    assert 'id="unread-count"' not in client.get(reverse("notification_list")).content.decode()
    assert Notification.objects.get().read_at is not None
