"""Status changes in bulk: submit for review (authors) and review decisions (reviewers), from the
task list's filter, the command line and the API; each change audited, each refusal explained."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounts.services import api_token_create
from curation.models import StatusChange, Task, TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks(arithmetic, alice, django_user_model):
    from tests.conftest import make_user

    dora = make_user(django_user_model, "dora", "authors")
    import_tasks(
        arithmetic, alice, *[math_task(f"a-{i}", question=f"What is {i} + 1?", answer=str(i + 1)) for i in range(4)]
    )
    import_tasks(arithmetic, dora, math_task("d-0", question="What is 9 + 9?", answer="18"))
    Task.objects.filter(key="d-0").update(status=TaskStatus.APPROVED)  # visible to alice, not hers
    return dora


def statuses() -> dict[str, str]:
    return dict(Task.objects.values_list("key", "status"))


def test_the_task_list_submits_every_task_matching_its_filter(client, alice, arithmetic, tasks):
    Task.objects.filter(key="a-3").update(status=TaskStatus.APPROVED)
    client.force_login(alice)
    page = client.get(reverse("task_list"), {"environment": "arithmetic", "q": "-"}).content.decode()
    assert 'id="bulk-actions"' in page and "Apply to all 5 matching" in page
    response = client.post(reverse("task_bulk") + "?environment=arithmetic&q=-", {"action": "submit"}, follow=True)
    assert statuses() == {
        "a-0": "submitted",
        "a-1": "submitted",
        "a-2": "submitted",
        "a-3": "approved",
        "d-0": "approved",
    }
    text = response.content.decode()
    assert "3 task(s) submitted for review; 2 skipped." in text and "d-0: not your task" in text
    assert "a-3: A task in status &#x27;approved&#x27; cannot move to &#x27;submitted&#x27;." in text
    assert StatusChange.objects.filter(to_status="submitted", changed_by=alice).count() == 3


def test_reviewers_decide_in_bulk_from_the_task_list_and_need_a_comment_to_reject(
    client, alice, bob, arithmetic, tasks
):
    call_command("bulk_status", "submit", environment="arithmetic", user="alice")
    client.force_login(bob)
    client.post(reverse("task_bulk") + "?environment=arithmetic&status=submitted", {"action": "reject"})
    assert not Task.objects.filter(status=TaskStatus.REJECTED).exists()
    client.post(reverse("task_bulk") + "?environment=arithmetic&status=submitted&q=a-1", {"action": "approve"})
    assert statuses()["a-1"] == "approved" and statuses()["a-0"] == "submitted"


def test_the_command_line_submits_and_decides(alice, bob, arithmetic, tasks, tmp_path, capsys):
    keys = tmp_path / "keys.txt"
    keys.write_text("a-0\na-2\n")
    call_command("bulk_status", "submit", environment="arithmetic", user="alice", keys_from=str(keys))
    assert "submit: 2 task(s) changed, 0 skipped." in capsys.readouterr().out
    call_command(
        "bulk_status", "send_back", environment="arithmetic", user="bob", status="submitted", comment="Say the unit."
    )
    assert statuses() == {
        "a-0": "changes_requested",
        "a-1": "draft",
        "a-2": "changes_requested",
        "a-3": "draft",
        "d-0": "approved",
    }
    call_command("bulk_status", "approve", environment="arithmetic", user="bob", dry_run=True)
    assert "nothing changed" in capsys.readouterr().out


def test_the_api_changes_status_in_bulk_with_the_curate_scope_only(client, alice, bob, arithmetic, tasks):
    def post(user, body, scopes=("curate",)):
        secret = api_token_create(user=user, name="t", scopes=list(scopes))[1]
        return client.post(
            reverse("api_task_bulk"),
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {secret}",
        )

    assert post(alice, {"action": "submit", "environment": "arithmetic"}, scopes=["read"]).status_code == 403
    response = post(alice, {"action": "submit", "environment": "arithmetic", "keys": ["a-0", "a-1", "d-0"]})
    assert response.status_code == 200
    assert response.json() == {"action": "submit", "changed": ["a-0", "a-1"], "skipped": ["d-0: not your task"]}
    # Authors cannot decide; a reviewer can, and a rejection needs a reason.
    assert post(alice, {"action": "approve", "environment": "arithmetic"}).status_code == 403
    assert post(bob, {"action": "reject", "environment": "arithmetic"}).status_code == 400
    response = post(bob, {"action": "approve", "environment": "arithmetic", "status": "submitted"})
    assert response.json()["changed"] == ["a-0", "a-1"]
    assert statuses()["a-0"] == "approved"
