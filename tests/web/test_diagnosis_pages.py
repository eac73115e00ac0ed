"""Too-hard diagnoses on the pages and the API: the task list filters by diagnosis, the task page shows the
evidence, the dashboard counts too-hard tasks by diagnosis among the tasks the viewer may see."""

import pytest
from django.urls import reverse

from accounts.services import api_token_create
from calibration import services
from curation.models import TaskStatus
from tests.conftest import make_user
from tests.factories import TOO_HARD_MAX_NEW_TOKENS, too_hard_answer, too_hard_probe, too_hard_tasks
from tests.support.openai_server import serve_openai

pytestmark = pytest.mark.django_db


@pytest.fixture
def diagnosed(arithmetic, alice):
    """alice's three draft tasks, probed: prose is suspect_verifier, boxed hard, long truncated."""
    with serve_openai(respond=too_hard_answer) as base_url:
        model = services.probe_model_add(
            name="fake", backend="openai", base_url=base_url, model="fake-model", max_new_tokens=TOO_HARD_MAX_NEW_TOKENS
        )
        too_hard_tasks(arithmetic, alice)
        too_hard_probe(arithmetic, alice, model)
    return arithmetic


def keys_listed(page: str) -> set[str]:
    return {key for key in ("prose", "boxed", "long") if f'/tasks/arithmetic/{key}/"' in page}


def test_the_task_list_filters_too_hard_tasks_by_diagnosis(client, alice, diagnosed):
    client.force_login(alice)
    url = reverse("task_list")
    everything = client.get(url, {"environment": "arithmetic"}).content.decode()
    assert keys_listed(everything) == {"prose", "boxed", "long"}
    assert 'class="diagnosis diagnosis-suspect_verifier">suspect verifier<' in everything
    for diagnosis, key in (("suspect_verifier", "prose"), ("hard", "boxed"), ("truncated", "long")):
        page = client.get(url, {"environment": "arithmetic", "band": "too_hard", "diagnosis": diagnosis})
        assert page.status_code == 200 and keys_listed(page.content.decode()) == {key}
        assert f'<option value="{diagnosis}" selected>' in page.content.decode()


def test_a_diagnosis_that_does_not_exist_is_a_400_naming_the_parameter(client, alice, diagnosed):
    client.force_login(alice)
    response = client.get(reverse("task_list"), {"diagnosis": "broken"})
    assert response.status_code == 400


def test_the_task_page_shows_the_diagnosis_and_the_rollouts_that_show_it(client, alice, diagnosed):
    client.force_login(alice)
    prose = client.get(reverse("task_detail", args=["arithmetic", "prose"])).content.decode()
    assert 'id="diagnosis-fake"' in prose and "Why too hard under fake" in prose
    assert "16 of 16 refused completions gave the reference value" in prose
    assert "refused, although its final answer <code>42</code> has the reference value" in prose
    assert "Six times seven is 42, so the answer is 42." in prose
    long = client.get(reverse("task_detail", args=["arithmetic", "long"])).content.decode()
    assert "16 of 16 attempts stopped at the completion budget: raise max new tokens" in long
    assert "gave the reference value" not in long.split('id="diagnosis-fake"')[1].split("</p>")[0]


def test_the_dashboard_counts_too_hard_tasks_by_diagnosis_with_links_to_the_list(client, alice, diagnosed):
    client.force_login(alice)
    page = client.get(reverse("dashboard"), {"environment": "arithmetic", "model": "fake"}).content.decode()
    table = page.split('id="too-hard-diagnoses"')[1].split("</section>")[0]
    for diagnosis in ("suspect_verifier", "truncated", "hard"):
        link = f"?environment=arithmetic&model=fake&band=too_hard&diagnosis={diagnosis}"
        assert f'href="/tasks/{link}">1</a>' in table


def test_the_dashboard_counts_only_tasks_the_viewer_may_see(client, django_user_model, diagnosed):
    dave = make_user(django_user_model, "dave", "authors")  # another author: alice's drafts are hers
    client.force_login(dave)
    page = client.get(reverse("dashboard"), {"environment": "arithmetic", "model": "fake"}).content.decode()
    table = page.split('id="too-hard-diagnoses"')[1].split("</section>")[0]
    assert "diagnosis=" not in table and table.count('<td class="num">0</td>') == 3
    listed = client.get(reverse("task_list"), {"diagnosis": "suspect_verifier"}).content.decode()
    assert keys_listed(listed) == set()


def test_trainers_use_the_api_not_the_pages(client, charlie, diagnosed):
    client.force_login(charlie)
    assert client.get(reverse("task_list"), {"diagnosis": "hard"}).status_code == 403
    assert client.get(reverse("dashboard")).status_code == 403


def test_the_api_filters_and_serialises_the_diagnosis(client, charlie, diagnosed):
    diagnosed.tasks.update(status=TaskStatus.APPROVED)  # trainers see approved, active and retired tasks
    secret = api_token_create(user=charlie, name="trainer", scopes=["read"])[1]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    tasks = client.get("/api/v1/tasks", {"diagnosis": "truncated"}, **headers).json()["results"]
    assert [(task["key"], task["calibration"]["diagnosis"]) for task in tasks] == [("long", "truncated")]
    calibrations = client.get("/api/v1/calibrations", {"diagnosis": "suspect_verifier"}, **headers).json()["results"]
    assert [calibration["task"] for calibration in calibrations] == ["prose"]
    assert calibrations[0]["diagnosis_evidence"]["refused_right"] == 16
    refused = client.get("/api/v1/tasks", {"diagnosis": "broken"}, **headers)
    assert refused.status_code == 400 and "diagnosis" in refused.json()["fields"]


def test_the_api_shows_no_diagnosis_of_tasks_the_trainer_may_not_see(client, charlie, diagnosed):
    secret = api_token_create(user=charlie, name="trainer", scopes=["read"])[1]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    assert client.get("/api/v1/calibrations", {"diagnosis": "suspect_verifier"}, **headers).json()["results"] == []
