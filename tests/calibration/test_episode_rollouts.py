"""Rollouts of tool tasks are episodes: generated, stored with their transcript, judged by state."""

import json

import pytest

from calibration import services
from calibration.models import Calibration, Outcome, Rollout
from curation.services import environment_create
from engine.episodes import backoffice
from engine.packing import unpack_tokens
from tests.factories import import_tasks
from tests.support.openai_server import OpenAITestServer


def tool_task(key, deal_id):
    return {
        "key": key,
        "prompt": [{"role": "user", "content": f"Mark deal {deal_id} as won."}],
        "answer": json.dumps(
            [{"name": "update_record", "arguments": {"table": "deals", "id": deal_id, "fields": {"stage": "won"}}}]
        ),
        "verifier": {
            "kind": "state_check",
            "environment": "backoffice",
            "seed": 3,
            "checks": [{"table": "deals", "where": {"id": deal_id}, "expect": {"stage": "won"}}],
        },
        "tools": backoffice.TOOL_SCHEMAS,
        "domain": "workflow",
    }


def always_wins_deal_1(prompt_text, seed):
    if prompt_text.count("<assistant>") == 1:
        call = {"name": "update_record", "arguments": {"table": "deals", "id": 1, "fields": {"stage": "won"}}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    return "Done."


@pytest.mark.django_db
def test_a_probe_of_tool_tasks_runs_episodes_and_judges_the_final_state(alice):
    environment = environment_create(name="backoffice", domain="workflow")
    report = import_tasks(environment, alice, tool_task("win-1", 1), tool_task("win-2", 2), run_audits=True)
    assert report.ok and not report.audit_failures
    with OpenAITestServer(respond=always_wins_deal_1, tool_parser=True) as server:
        probe_model = services.probe_model_add(
            name="fake", backend="openai", base_url=server.base_url, model="fake-model", max_new_tokens=200
        )
        campaign = services.campaign_start(
            environment=environment,
            probe_model=probe_model,
            created_by=alice,
            rollouts=2,
            round_size=2,
            seed=7,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    rollouts = list(Rollout.objects.filter(campaign=campaign).select_related("task_version__task"))
    assert len(rollouts) == 4
    outcomes = {(rollout.task_version.task.key, rollout.outcome) for rollout in rollouts}
    assert outcomes == {("win-1", Outcome.PASS), ("win-2", Outcome.FAIL)}
    pass_rates = {
        c.task_version.task.key: (c.attempts, c.successes)
        for c in Calibration.objects.filter(probe_model=probe_model).select_related("task_version__task")
    }
    assert pass_rates == {"win-1": (2, 2), "win-2": (2, 0)}
    for rollout in rollouts:
        episode = rollout.episode
        assert episode["stop_reason"] == "answered" and episode["counts"]["ok"] == 1
        assert [len(turn["tool_calls"]) for turn in episode["turns"]] == [1, 0]
        assert episode["final_state"]["deals"][0]["stage"] == "won"
        assert rollout.text == "Done."
        # The fake server re-renders the conversation without the sampled EOS, so its turns are not
        # one token sequence: the exact tokens live per turn, and the flat token fields stay empty.
        assert episode["tokens"] is None and unpack_tokens(rollout.completion_token_ids) is None
        assert all(len(turn["logprobs"]) == len(turn["completion_token_ids"]) for turn in episode["turns"])

    # The trajectory viewer shows the state diff: deal 1's stage went from its seeded value to won.
    from django.test import Client

    staff = type(alice).objects.create_user("viewer-staff", is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get("/rollouts/", {"environment": "backoffice", "task": "win-1"}).content.decode()
    assert "State changes (1)" in page
    before = backoffice.snapshot(backoffice.reset(3))["deals"][0]["stage"]
    assert f"{before} → won" in page


@pytest.mark.django_db
def test_a_worker_without_the_plugin_stores_no_attempt_and_says_why(alice):
    from calibration.errors import ServerUnavailable
    from calibration.models import Campaign
    from curation.models import TaskVersion

    environment = environment_create(name="backoffice", domain="workflow")
    import_tasks(environment, alice, tool_task("win-1", 1))
    # The plug-in the stored task names is not installed in this process (uninstalled since the import).
    version = TaskVersion.objects.get(task__key="win-1")
    TaskVersion.objects.filter(pk=version.pk).update(verifier={**version.verifier, "environment": "warehouse"})
    with OpenAITestServer(respond=always_wins_deal_1, tool_parser=True) as server:
        probe_model = services.probe_model_add(name="fake", backend="openai", base_url=server.base_url, model="m")
        campaign = services.campaign_start(
            environment=environment, probe_model=probe_model, created_by=alice, rollouts=2, round_size=2, enqueue=False
        )
        with pytest.raises(ServerUnavailable) as waiting:
            services.rollouts_generate(campaign_id=campaign.pk, task_version_ids=[version.pk], round_index=0)
        assert server.requests == []  # the model was never asked
    assert "2 samples wait" in str(waiting.value)
    assert "on this worker: unknown tool environment 'warehouse'; installed plug-ins: backoffice" in str(waiting.value)
    assert Rollout.objects.filter(campaign=campaign).count() == 0
    assert "unknown tool environment 'warehouse'" in Campaign.objects.get(pk=campaign.pk).server_error
