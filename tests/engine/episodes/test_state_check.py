"""The state_check verifier: judged on the final database, passing and failing."""

import json

import pytest

from engine.episodes.backoffice_tasks import backoffice_tasks
from engine.episodes.world import initial_state
from engine.verifiers import VerifierConfigError, audit, validate_config, verify

VERIFIER = {
    "kind": "state_check",
    "environment": "backoffice",
    "seed": 3,
    "checks": [{"table": "deals", "where": {"id": 1}, "expect": {"stage": "won"}}, {"unchanged": ["customers"]}],
}
WIN_DEAL_1 = [{"name": "update_record", "arguments": {"table": "deals", "id": 1, "fields": {"stage": "won"}}}]


def test_replayed_tool_calls_that_do_the_job_pass():
    assert verify(verifier=VERIFIER, completion=json.dumps(WIN_DEAL_1)).outcome == "pass"


def test_no_action_fails_and_words_do_not_count():
    assert verify(verifier=VERIFIER, completion="").outcome == "fail"
    assert verify(verifier=VERIFIER, completion="I have marked deal 1 as won.").outcome == "fail"


def test_episode_final_state_is_judged():
    state = initial_state(environment="backoffice", seed=3)
    episode = {"environment": "backoffice", "seed": 3, "stop_reason": "answered", "final_state": state}
    assert verify(verifier=VERIFIER, completion=episode).outcome == "fail"
    state["deals"][0]["stage"] = "WON "  # case and whitespace are ignored
    assert verify(verifier=VERIFIER, completion=episode).outcome == "pass"
    state["customers"][0]["tier"] = "platinum"
    verdict = verify(verifier=VERIFIER, completion=episode)
    assert verdict.outcome == "fail" and "customers" in verdict.detail


def test_count_checks():
    verifier = {**VERIFIER, "checks": [{"table": "deals", "where": {"stage": "won"}, "count": 0}]}
    state = initial_state(environment="backoffice", seed=3)
    for row in state["deals"]:
        row["stage"] = "lost"
    assert verify(verifier=verifier, completion=state).outcome == "pass"
    state["deals"][0]["stage"] = "won"
    assert verify(verifier=verifier, completion=state).outcome == "fail"


def test_episode_of_another_world_or_unfinished_is_an_error_and_tool_timeout_is_a_timeout():
    state = initial_state(environment="backoffice", seed=3)
    wrong_seed = {"environment": "backoffice", "seed": 4, "final_state": state}
    assert verify(verifier=VERIFIER, completion=wrong_seed).outcome == "error"
    assert verify(verifier=VERIFIER, completion={"seed": 3, "final_state": None}).outcome == "error"
    stuck = {"seed": 3, "stop_reason": "tool_timeout", "final_state": None}
    verdict = verify(verifier=VERIFIER, completion=stuck)
    assert verdict.outcome == "timeout" and verdict.reward is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"environment": "mars"}, "environment"),
        ({"checks": []}, "checks"),
        ({"checks": [{"table": "nope", "count": 1}]}, "checks[0]"),
        ({"checks": [{"table": "deals", "count": 1, "expect": {}}]}, "checks[0]"),
        ({"seed": -1}, "seed"),
        ({"chekcs": []}, "chekcs"),
    ],
)
def test_bad_configs_name_the_field(change, field):
    with pytest.raises(VerifierConfigError) as error:
        validate_config({**VERIFIER, **change})
    assert error.value.field == field


def test_demo_tasks_span_four_levels_and_pass_their_audits():
    tasks = list(backoffice_tasks())
    assert len(tasks) >= 30
    assert {task["metadata"]["level"] for task in tasks} == {1, 2, 3, 4}
    assert len({task["key"] for task in tasks}) == len(tasks)
    for task in tasks:
        assert task["tools"] and task["verifier"]["kind"] == "state_check"
        assert audit(verifier=task["verifier"], answer=task["answer"]) == [], task["key"]


def test_demo_tasks_are_the_same_on_every_call():
    assert list(backoffice_tasks()) == list(backoffice_tasks())


def test_policy_task_fails_when_the_policy_is_ignored():
    task = next(task for task in backoffice_tasks() if task["metadata"]["template"] == "submit_capped_expenses")
    calls = json.loads(task["answer"])
    limits = {
        row["category"]: row["limit_amount"]
        for row in initial_state(environment="backoffice", seed=task["verifier"]["seed"])["policies"]
    }
    # Claim one item above its limit: the report is filed, but against the policy.
    items = calls[0]["arguments"]["items"]
    items[0] = {**items[0], "amount": limits[items[0]["category"]] + 10}
    assert verify(verifier=task["verifier"], completion=json.dumps(calls)).outcome == "fail"
