"""Campaigns on an MCP tool server: a real SDK server process, scripted policies over real HTTP.

The oracle passes every task and the null policy fails every one; a server that cannot be reached
is an infrastructure outcome (nothing stored, the round asked for again, counted), never a wrong
answer; the two rewards disagreeing flags the rollout.
"""

import pytest
from django.test import Client

from calibration.models import Calibration, Outcome, Rollout
from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.services import environment_create
from tests.calibration.mcp_tasks import PLANS, mcp_task, null_policy, oracle, says_right_does_nothing
from tests.factories import import_tasks
from tests.support.mcp_kv_server import free_port, serve_mcp_kv
from tests.support.server_campaigns import (
    assert_each_passes_flagged_as_disagreeing,
    probe_inline,
    unreachable_round_is_withheld_then_passes,
)


def mcp_environment(url, alice, *, reward="environment", name="kv-tools"):
    server = mcp_server_register(name="kv", url=url, timeout_s=10, max_sessions=4)
    environment = environment_create(name=name, domain="tool use")
    environment_use_mcp_server(environment=environment, server=server)
    report = import_tasks(environment, alice, *[mcp_task(key, reward=reward) for key in PLANS], run_audits=True)
    assert report.ok and not report.audit_failures, report
    return environment


@pytest.mark.django_db
def test_the_oracle_passes_every_task_in_its_own_session(alice):
    with serve_mcp_kv() as url:
        environment = mcp_environment(url, alice)
        campaign = probe_inline(environment, alice, oracle)
    rollouts = list(Rollout.objects.filter(campaign=campaign).select_related("task_version__task"))
    assert len(rollouts) == 2 * len(PLANS)
    assert {rollout.outcome for rollout in rollouts} == {Outcome.PASS}
    for rollout in rollouts:
        calls = [call["name"] for turn in rollout.episode["turns"] for call in turn["tool_calls"]]
        assert calls == [name for name, _ in PLANS[rollout.task_version.task.key][1]]
        assert rollout.episode["counts"]["ok"] == len(calls) and rollout.episode["stop_reason"] == "answered"
        # The reward tool is Passband's, hidden from the model.
        assert rollout.episode["final_state"]["environment_reward"][0]["reward"] == 1.0
        assert "flags" not in rollout.episode
    # get('colour') read back what this session stored: state lives per session, and two rollouts of
    # one task never saw each other's keys (each would otherwise start with the other's value).
    colour = [r for r in rollouts if r.task_version.task.key == "colour-roundtrip"]
    assert all(r.episode["turns"][1]["observations"][0]["content"] == "blue" for r in colour)
    calibrations = Calibration.objects.filter(task_version__task__environment=environment)
    assert sorted((c.attempts, c.successes) for c in calibrations) == [(2, 2)] * len(PLANS)


@pytest.mark.django_db
def test_the_null_policy_fails_every_task(alice):
    with serve_mcp_kv() as url:
        environment = mcp_environment(url, alice)
        campaign = probe_inline(environment, alice, null_policy)
    outcomes = list(Rollout.objects.filter(campaign=campaign).values_list("outcome", flat=True))
    assert len(outcomes) == 2 * len(PLANS) and set(outcomes) == {Outcome.FAIL}


@pytest.mark.django_db
def test_rewards_that_disagree_flag_the_rollout_and_the_chosen_one_counts(alice):
    with serve_mcp_kv() as url:
        environment = mcp_environment(url, alice, reward="verifier")
        campaign = probe_inline(environment, alice, says_right_does_nothing, rollouts=1)
    # The task chose its Passband verifier: the right final answer passes, but the store is empty, so the
    # environment's reward is 0.
    assert_each_passes_flagged_as_disagreeing(campaign, tasks=len(PLANS))
    # The rollouts page says so.
    staff = type(alice).objects.create_user("viewer-staff", is_staff=True)
    viewer = Client()
    viewer.force_login(staff)
    page = viewer.get("/rollouts/", {"environment": environment.name, "task": "sum-store"}).content.decode()
    assert "flagged: the environment's reward and the Passband check disagree" in page


@pytest.mark.django_db
def test_an_unreachable_server_is_an_infrastructure_outcome_never_a_wrong_answer(alice):
    port = free_port()
    with serve_mcp_kv(port=port) as url:
        environment = mcp_environment(url, alice)
    # The server is gone now (its port is closed); then it comes back on that port.
    unreachable_round_is_withheld_then_passes(
        environment,
        alice,
        oracle,
        says="MCP server kv",
        failed="opening a session",
        labels={"server": "kv"},
        serving=lambda: serve_mcp_kv(port=port),
    )
