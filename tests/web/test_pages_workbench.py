"""Author workspace pages: my tasks filters, the editor, probe now, and the trajectory viewer."""

import pytest
from django.urls import reverse

from calibration.models import Band, Calibration, Campaign, ProbeModel, Rollout
from curation.models import TaskStatus
from curation.services import task_transition
from engine.packing import pack_logprobs, pack_tokens
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db


def probe_model():
    return ProbeModel.objects.get_or_create(
        name="probe", defaults={"backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    )[0]


def add_rollouts(task, owner, outcomes):
    model = probe_model()
    campaign = Campaign.objects.create(environment=task.environment, probe_model=model, created_by=owner, seed=1)
    for index, outcome in enumerate(outcomes):
        Rollout.objects.create(
            campaign=campaign,
            task_version=task.current_version,
            probe_model=model,
            sample_index=index,
            seed=index,
            prompt_token_ids=pack_tokens([1, 2, 3]),
            completion_token_ids=pack_tokens([40, 41]),
            logprobs=pack_logprobs([-0.05, -2.5]),
            text=f"The answer is {index} ({outcome})",
            outcome=outcome,
            detail=f"expected 5, got {index}",
            verify_ms=1.5,
            generation_ms=120,
            cost_usd="0.0001",
        )
    return campaign


def test_my_tasks_filters_by_owner_status_flag_and_text(client, alice, bob, arithmetic, django_user_model):
    import_tasks(arithmetic, alice, math_task("mine-1"), math_task("mine-2", question="What is 9 + 9?", answer="18"))
    dora = django_user_model.objects.create_user("dora")
    import_tasks(arithmetic, dora, math_task("hers", question="What is 1 + 1?", answer="2"))
    task_transition(task=arithmetic.tasks.get(key="hers"), to_status=TaskStatus.SUBMITTED, by=dora)
    mine_2 = arithmetic.tasks.get(key="mine-2")
    Calibration.objects.create(
        task_version=mine_2.current_version, probe_model=probe_model(), band=Band.TOO_HARD, flags=["verifier_trouble"]
    )
    client.force_login(bob)  # a reviewer sees everyone's tasks, but "mine" narrows to their own: none
    assert b"mine-1" not in client.get(reverse("task_list"), {"mine": "1"}).content
    client.force_login(alice)
    page = client.get(reverse("task_list"), {"mine": "1"}).content
    assert b"mine-1" in page and b"hers" not in page
    page = client.get(reverse("task_list"), {"mine": "1", "flag": "verifier_trouble"}).content
    assert b"mine-2" in page and b"mine-1" not in page
    page = client.get(reverse("task_list"), {"status": "draft", "q": "9 + 9"}).content
    assert b"mine-2" in page and b"mine-1" not in page


def test_editor_saves_a_new_audited_version_and_keeps_the_old(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    task = arithmetic.tasks.get()
    client.force_login(alice)
    page = client.get(reverse("task_edit", args=["arithmetic", "t-1"])).content.decode()
    assert "marked.min.js" in page and "katex.min.js" in page and "What is 2 + 3?" in page
    response = client.post(
        reverse("task_edit", args=["arithmetic", "t-1"]),
        {
            "prompt_format": "text",
            "prompt": "Compute $3 \\times 4$.",
            "answer": "12",
            "verifier": '{"kind": "math"}',
            "authoring_cost_usd": "10",
        },
    )
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.current_version.number == 2 and task.current_version.prompt[0]["content"] == "Compute $3 \\times 4$."
    assert task.current_version.audit_passed is True
    assert task.versions.get(number=1).prompt[0]["content"] == "What is 2 + 3?"


def test_editor_shows_and_keeps_the_declared_difficulty(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1", difficulty=4))
    client.force_login(alice)
    page = client.get(reverse("task_edit", args=["arithmetic", "t-1"])).content.decode()
    assert 'name="difficulty" value="4"' in page
    edit = {"prompt_format": "text", "prompt": "What is 3 + 3?", "answer": "6", "verifier": '{"kind": "math"}'}
    client.post(reverse("task_edit", args=["arithmetic", "t-1"]), {**edit, "difficulty": "hard"})
    assert arithmetic.tasks.get().current_version.declared_difficulty == 3.0
    response = client.post(
        reverse("task_edit", args=["arithmetic", "t-1"]), {**edit, "answer": "7", "difficulty": "very"}
    )
    assert response.status_code == 400 and b"difficulty" in response.content
    assert arithmetic.tasks.get().versions.count() == 2


def test_editor_reports_a_bad_field_and_saves_nothing(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    client.force_login(alice)
    response = client.post(
        reverse("task_edit", args=["arithmetic", "t-1"]),
        {"prompt_format": "text", "prompt": "x", "answer": "1", "verifier": '{"kind": '},
    )
    assert response.status_code == 400 and b"verifier: not valid JSON" in response.content
    response = client.post(
        reverse("task_edit", args=["arithmetic", "t-1"]),
        {"prompt_format": "text", "prompt": "x", "answer": "1", "verifier": '{"kind": "no-such-kind"}'},
    )
    assert response.status_code == 400 and b"verifier" in response.content
    assert arithmetic.tasks.get().versions.count() == 1


def test_editor_audit_failure_is_shown(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    client.force_login(alice)
    client.post(
        reverse("task_edit", args=["arithmetic", "t-1"]),
        {"prompt_format": "text", "prompt": "What is 2 + 2?", "answer": "", "verifier": '{"kind": "math"}'},
        follow=True,
    )
    version = arithmetic.tasks.get().current_version
    assert version.number == 2 and version.audit_passed is False and version.audit_problems


def test_submitted_tasks_cannot_be_edited(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    task_transition(task=arithmetic.tasks.get(), to_status=TaskStatus.SUBMITTED, by=alice)
    client.force_login(alice)
    response = client.post(
        reverse("task_edit", args=["arithmetic", "t-1"]),
        {"prompt_format": "text", "prompt": "What is 7 + 7?", "answer": "14", "verifier": '{"kind": "math"}'},
    )
    assert response.status_code == 400 and b"only draft" in response.content


def test_probe_now_starts_a_campaign_over_one_task(client, alice, arithmetic, django_capture_on_commit_callbacks):
    import_tasks(arithmetic, alice, math_task("t-1"), math_task("t-2", question="What is 1 + 6?", answer="7"))
    model = probe_model()
    client.force_login(alice)
    from unittest import mock

    with (
        mock.patch("calibration.services.campaigns.campaign_enqueue_pending") as enqueue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post(
            reverse("task_probe", args=["arithmetic", "t-1"]),
            {"model": model.name, "policy": "adaptive", "rollouts": "16"},
        )
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response.url == reverse("campaign_detail", args=[campaign.pk])
    assert list(campaign.items.values_list("task_version__task__key", flat=True)) == ["t-1"]
    enqueue.assert_called_once_with(campaign_id=campaign.pk)


def test_trajectory_viewer_groups_filters_and_searches(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"), math_task("t-2", question="What is 1 + 6?", answer="7"))
    add_rollouts(arithmetic.tasks.get(key="t-1"), alice, ["pass", "fail", "error"])
    add_rollouts(arithmetic.tasks.get(key="t-2"), alice, ["fail"])
    client.force_login(alice)
    page = client.get(reverse("trajectory_list"), {"environment": "arithmetic"}).content.decode()
    assert "arithmetic/t-1" in page and "arithmetic/t-2" in page
    assert 'class="token' in page and "logprob -2.500" in page and "expected 5, got 1" in page
    page = client.get(reverse("trajectory_list"), {"environment": "arithmetic", "outcome": "error"}).content.decode()
    assert "The answer is 2 (error)" in page and "(pass)" not in page
    page = client.get(reverse("trajectory_list"), {"q": "is 1 (fail)"}).content.decode()
    assert "arithmetic/t-1" in page and "arithmetic/t-2" not in page
    page = client.get(reverse("trajectory_list"), {"task": "t-2"}).content.decode()
    assert "arithmetic/t-2" in page and "arithmetic/t-1" not in page


def test_trajectory_viewer_hides_other_authors_drafts(client, alice, arithmetic, django_user_model):
    dora = django_user_model.objects.create_user("dora")
    import_tasks(arithmetic, dora, math_task("secret"))
    add_rollouts(arithmetic.tasks.get(key="secret"), dora, ["pass"])
    client.force_login(alice)
    assert b"secret" not in client.get(reverse("trajectory_list")).content


def test_trajectory_viewer_shows_episode_messages_tool_calls_and_observations(client, alice, arithmetic):
    import_tasks(arithmetic, alice, math_task("t-1"))
    campaign = add_rollouts(arithmetic.tasks.get(), alice, ["pass"])
    rollout = campaign.rollouts.get()
    rollout.episode = {
        "messages": [
            {"role": "user", "content": "Refund order 7."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": '{"order": 7}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "refund", "content": "refunded 7"},
        ],
        "stop_reason": "final_answer",
        "error": None,
        "final_state": {"refunded": [7]},
    }
    rollout.save(update_fields=["episode"])
    client.force_login(alice)
    page = client.get(reverse("trajectory_list"), {"task": "t-1"}).content.decode()
    assert "Refund order 7." in page and "refund({&quot;order&quot;: 7})" in page
    assert "refunded 7" in page and "stopped by final_answer" in page and "Final state" in page


def test_task_page_shows_the_first_rollouts_with_their_token_counts_and_says_how_many_more(client, alice, arithmetic):
    from web.views.tasks import TASK_PAGE_ROLLOUTS

    import_tasks(arithmetic, alice, math_task("many"))
    task = arithmetic.tasks.get(key="many")
    add_rollouts(task, alice, ["pass", "fail"] * TASK_PAGE_ROLLOUTS)
    client.force_login(alice)
    body = client.get(f"/tasks/arithmetic/{task.key}/").content.decode()
    assert body.count('<tr class="outcome-') == TASK_PAGE_ROLLOUTS
    assert f"The first {TASK_PAGE_ROLLOUTS} of {2 * TASK_PAGE_ROLLOUTS}" in body
    assert '<td class="num">2</td>' in body  # two completion tokens, counted from the packed ids
    body = client.get(f"/tasks/arithmetic/{task.key}/?outcome=pass").content.decode()
    assert body.count('<tr class="outcome-pass">') == TASK_PAGE_ROLLOUTS and "rollouts-shown" not in body
