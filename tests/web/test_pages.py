"""Pages render for a signed-in user, redirect an anonymous one, and refuse the wrong role."""

import pytest
from django.urls import reverse

from curation.models import TaskStatus
from tests.factories import import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db

PAGES = ["environment_list", "task_list", "dashboard", "task_upload"]


@pytest.mark.parametrize("name", PAGES)
def test_anonymous_is_sent_to_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("name", PAGES)
def test_pages_render_for_an_author(client, alice, arithmetic, name):
    import_tasks(arithmetic, alice, math_task("t-1"))
    client.force_login(alice)
    response = client.get(reverse(name))
    assert response.status_code == 200
    assert b"Passband" in response.content


def test_login_page_and_sign_in(client, alice):
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 302
    assert client.get(reverse("environment_list")).status_code == 200


def test_trainer_accounts_are_refused_pages(client, charlie):
    client.force_login(charlie)
    assert client.get(reverse("environment_list")).status_code == 403


@pytest.mark.parametrize(("username", "lands_on"), [("alice", "environment_list"), ("charlie", "release_list")])
def test_signing_in_lands_on_a_page_of_ones_role(client, request, username, lands_on):
    request.getfixturevalue(username)
    response = client.post(reverse("login"), {"username": username, "password": f"pw-{username}"}, follow=True)
    assert [url for url, _ in response.redirect_chain] == [reverse("landing"), reverse(lands_on)]
    assert response.status_code == 200


def test_reviewer_cannot_upload(client, bob):
    client.force_login(bob)
    assert client.get(reverse("task_upload")).status_code == 403


def test_task_list_shows_tasks_and_filters(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"), math_task("t-2", question="What is 7 + 1?", answer="8"))
    client.force_login(alice)
    response = client.get(reverse("task_list"), {"environment": "arithmetic", "q": "7 + 1"})
    assert b"t-2" in response.content and b"t-1" not in response.content


def test_author_cannot_see_another_authors_draft(client, alice, django_user_model, arithmetic):
    other = django_user_model.objects.create_user("dora")
    import_tasks(arithmetic, other, math_task("secret"))
    client.force_login(alice)
    assert client.get(reverse("task_detail", args=["arithmetic", "secret"])).status_code == 404
    assert b"secret" not in client.get(reverse("task_list")).content


def test_reviewer_sees_every_task(client, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    client.force_login(bob)
    assert client.get(reverse("task_detail", args=["arithmetic", "t-1"])).status_code == 200


def test_upload_page_reports_bad_lines_and_imports_nothing(client, alice, arithmetic):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(alice)
    bad = SimpleUploadedFile("mine.jsonl", jsonl(math_task("a"), '{"prompt": 3}'))
    response = client.post(reverse("task_upload"), {"environment": "arithmetic", "file": bad})
    assert response.status_code == 400
    assert b"Nothing was imported" in response.content and b"must be a non-empty string" in response.content
    good = SimpleUploadedFile("mine.jsonl", jsonl(math_task("a")))
    response = client.post(reverse("task_upload"), {"environment": "arithmetic", "file": good})
    assert response.status_code == 200 and b"1 new task" in response.content


def test_submit_for_review_records_the_transition(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    client.force_login(alice)
    client.post(reverse("task_submit", args=["arithmetic", "t-1"]))
    task = arithmetic.tasks.get()
    assert task.status == TaskStatus.SUBMITTED
    change = task.status_changes.get()
    assert (change.from_status, change.to_status, change.changed_by) == ("draft", "submitted", alice)


def test_histogram_endpoint_needs_login(client, alice, arithmetic):
    url = reverse("pass_rate_histogram_data") + "?environment=arithmetic"
    assert client.get(url).status_code == 302
    client.force_login(alice)
    data = client.get(url).json()
    assert data["floor"] == 0.02 and data["retire_at"] == 0.70 and len(data["bin_starts"]) == 20
