"""One task filter (releases.task_filters): the same filter selects the same tasks through the list
page, the API list, bulk actions on the page, the API and the command line, and the export."""

import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from accounts.services import api_token_create
from curation.models import Task, TaskStatus, TaskVersion
from tests.conftest import make_user
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db

FILTERS = [
    {"flag": "audit_failed"},
    {"status": "approved"},
    {"flag": "audit_failed", "status": "draft"},
    {"q": "plus"},
]


@pytest.fixture
def corpus(arithmetic, alice, django_user_model):
    """alice: ok (draft), bad (draft, failed audit), shipped (approved, failed audit);
    dora: hers (draft, failed audit), theirs (approved)."""
    dora = make_user(django_user_model, "dora", "authors")
    import_tasks(
        arithmetic,
        alice,
        math_task("ok", "What is 1 plus 1?", "2"),
        math_task("bad", "What is 2 + 2?", "4"),
        math_task("shipped", "What is 3 plus 3?", "6"),
    )
    import_tasks(arithmetic, dora, math_task("hers", "What is 4 + 4?", "8"), math_task("theirs", "5 + 5?", "10"))
    Task.objects.filter(key__in=["shipped", "theirs"]).update(status=TaskStatus.APPROVED)
    TaskVersion.objects.filter(task__key__in=["bad", "shipped", "hers"]).update(audit_passed=False)


def expected(task_filter: dict) -> list[str]:
    tasks = Task.objects.all()
    if task_filter.get("flag") == "audit_failed":
        tasks = tasks.filter(current_version__audit_passed=False)
    if task_filter.get("status"):
        tasks = tasks.filter(status=task_filter["status"])
    if task_filter.get("q"):
        tasks = tasks.filter(current_version__prompt__icontains=task_filter["q"])
    return sorted(tasks.values_list("key", flat=True))


def through_page(client, user, task_filter) -> list[str]:
    client.force_login(user)
    response = client.get(reverse("task_list"), {"environment": "arithmetic", **task_filter})
    assert response.status_code == 200
    return sorted(task.key for task in response.context["tasks"])


def through_api(client, secret, task_filter) -> list[str]:
    response = client.get("/api/v1/tasks", {"environment": "arithmetic", **task_filter}, HTTP_AUTHORIZATION=secret)
    assert response.status_code == 200, response.content
    return sorted(row["key"] for row in response.json()["results"])


def through_api_bulk(client, secret, task_filter) -> list[str]:
    """Approve as a reviewer: drafts and approved tasks are skipped, each with its key."""
    body = {"action": "approve", "environment": "arithmetic", **task_filter}
    response = client.post("/api/v1/tasks/bulk", body, content_type="application/json", HTTP_AUTHORIZATION=secret)
    assert response.status_code == 200, response.content
    return sorted([*response.json()["changed"], *(line.split(":")[0] for line in response.json()["skipped"])])


def through_page_bulk(client, user, task_filter) -> int:
    client.force_login(user)
    query = "&".join(f"{name}={value}" for name, value in {"environment": "arithmetic", **task_filter}.items())
    response = client.post(reverse("task_bulk") + "?" + query, {"action": "approve"}, follow=True)
    summary = next(str(message) for message in response.context["messages"] if "skipped" in str(message))
    decided, skipped = (int(number) for number in re.findall(r"(\d+) (?:task\(s\)|skipped)", summary))
    return decided + skipped


def through_command(capsys, task_filter) -> list[str]:
    options = {"environment": "arithmetic", "user": "bob", "dry_run": True, **task_filter}
    options.pop("q", None)  # the command has no text search
    call_command("bulk_status", "approve", **options)
    lines = capsys.readouterr().out.strip().splitlines()
    return sorted(lines[:-1])


def through_export(tmp_path, task_filter) -> list[str]:
    out = tmp_path / "tasks.jsonl"
    args = [f"--{name}={value}" for name, value in task_filter.items() if name != "q"]
    call_command("export", "--environment", "arithmetic", *args, "--format", "native", "-o", str(out))
    return sorted(json.loads(line)["key"] for line in out.read_text().splitlines())


@pytest.mark.parametrize("task_filter", FILTERS, ids=["-".join(f) for f in FILTERS])
def test_one_filter_selects_the_same_tasks_everywhere(client, corpus, bob, capsys, tmp_path, task_filter):
    """bob reviews: he sees every task, so every path answers the whole corpus's matches."""
    secret = "Bearer " + api_token_create(user=bob, name="t", scopes=["read", "curate"])[1]
    keys = expected(task_filter)
    assert keys  # each filter matches something, and not everything
    assert len(keys) < Task.objects.count()
    assert through_page(client, bob, task_filter) == keys
    assert through_api(client, secret, task_filter) == keys
    if "q" not in task_filter:
        assert through_command(capsys, task_filter) == keys
        assert through_export(tmp_path, task_filter) == keys
    assert through_api_bulk(client, secret, task_filter) == keys
    assert through_page_bulk(client, bob, task_filter) == len(keys)


def test_an_author_gets_the_same_share_on_the_page_and_the_api(client, corpus, alice):
    secret = "Bearer " + api_token_create(user=alice, name="t", scopes=["read"])[1]
    # dora's draft with a failed audit is not alice's to see, on either path.
    assert through_page(client, alice, {"flag": "audit_failed"}) == ["bad", "shipped"]
    assert through_api(client, secret, {"flag": "audit_failed"}) == ["bad", "shipped"]
    assert through_page(client, alice, {"mine": "1"}) == ["bad", "ok", "shipped"]
    assert through_api(client, secret, {"mine": "true"}) == ["bad", "ok", "shipped"]


def test_a_wrong_value_is_refused_naming_the_parameter(client, corpus, bob):
    secret = "Bearer " + api_token_create(user=bob, name="t", scopes=["read", "curate"])[1]
    client.force_login(bob)
    assert client.get(reverse("task_list"), {"band": "hot"}).status_code == 400
    assert client.get(reverse("task_list"), {"environment": "nowhere"}).status_code == 404
    response = client.get("/api/v1/tasks", {"flag": "sticky"}, HTTP_AUTHORIZATION=secret)
    assert response.status_code == 400 and list(response.json()["fields"]) == ["flag"]
    assert client.get("/api/v1/tasks", {"model": "ghost"}, HTTP_AUTHORIZATION=secret).status_code == 404
    body = {"action": "approve", "environment": "nowhere"}
    response = client.post("/api/v1/tasks/bulk", body, content_type="application/json", HTTP_AUTHORIZATION=secret)
    assert response.status_code == 400 and list(response.json()["fields"]) == ["environment"]
