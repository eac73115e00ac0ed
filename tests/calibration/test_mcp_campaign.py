"""Campaigns on an MCP tool server: a real SDK server process, scripted policies over real HTTP.

The oracle passes every task and the null policy fails every one; a server that cannot be reached
is an infrastructure outcome (nothing stored, the round asked for again, counted), never a wrong
answer; the two rewards disagreeing flags the rollout.
"""

import pytest
from django.test import Client
from prometheus_client import REGISTRY

from calibration import services
from calibration.errors import ServerUnavailable
from calibration.models import Calibration, Campaign, Outcome, Rollout
from calibration.services.rounds import REWARD_DISAGREEMENT_FLAG
from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.services import environment_create
from tests.calibration.mcp_tasks import PLANS, mcp_task, null_policy, oracle, says_right_does_nothing
from tests.factories import import_tasks
from tests.support.mcp_kv_server import free_port, serve_mcp_kv
from tests.support.openai_server import OpenAITestServer


def mcp_environment(url, alice, *, reward="environment", name="kv-tools"):
    server = mcp_server_register(name="kv", url=url, timeout_s=10, max_sessions=4)
    environment = environment_create(name=name, domain="tool use")
    environment_use_mcp_server(environment=environment, server=server)
    report = import_tasks(environment, alice, *[mcp_task(key, reward=reward) for key in PLANS], run_audits=True)
    assert report.ok and not report.audit_failures, report
    return environment


def probe(environment, alice, respond, *, rollouts=2):
    with OpenAITestServer(respond=respond, tool_parser=True) as model_server:
        probe_model = services.probe_model_add(
            name="scripted", backend="openai", base_url=model_server.base_url, model="fake-model", max_new_tokens=200
        )
        campaign = services.campaign_start(
            environment=environment,
            probe_model=probe_model,
            created_by=alice,
            rollouts=rollouts,
            round_size=rollouts,
            seed=3,
            enqueue=False,
        )
        services.campaign_run_inline(campaign=campaign)
    return campaign


@pytest.mark.django_db
def test_the_oracle_passes_every_task_in_its_own_session(alice):
    with serve_mcp_kv() as url:
        environment = mcp_environment(url, alice)
        campaign = probe(environment, alice, oracle)
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
        campaign = probe(environment, alice, null_policy)
    outcomes = list(Rollout.objects.filter(campaign=campaign).values_list("outcome", flat=True))
    assert len(outcomes) == 2 * len(PLANS) and set(outcomes) == {Outcome.FAIL}


@pytest.mark.django_db
def test_rewards_that_disagree_flag_the_rollout_and_the_chosen_one_counts(alice):
    with serve_mcp_kv() as url:
        environment = mcp_environment(url, alice, reward="verifier")
        campaign = probe(environment, alice, says_right_does_nothing, rollouts=1)
    rollouts = list(Rollout.objects.filter(campaign=campaign))
    assert len(rollouts) == len(PLANS)
    for rollout in rollouts:
        # The task chose its Passband verifier: the right final answer passes...
        assert rollout.outcome == Outcome.PASS
        # ...but the store is empty, so the environment's reward is 0: flagged, and said so.
        assert rollout.episode["flags"] == [REWARD_DISAGREEMENT_FLAG]
        assert rollout.detail.startswith("rewards disagree: environment reward 0")
    # The rollouts page says so.
    staff = type(alice).objects.create_user("viewer-staff", is_staff=True)
    viewer = Client()
    viewer.force_login(staff)
    page = viewer.get("/rollouts/", {"environment": environment.name, "task": "sum-store"}).content.decode()
    assert "flagged: the environment's reward and the Passband check disagree" in page


def failures_counted(server: str) -> float:
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "passband_mcp_failures"
        for sample in metric.samples
        if sample.name == "passband_mcp_failures_total" and sample.labels.get("server") == server
    )


@pytest.mark.django_db
def test_an_unreachable_server_is_an_infrastructure_outcome_never_a_wrong_answer(alice):
    port = free_port()
    with serve_mcp_kv(port=port) as url:
        environment = mcp_environment(url, alice)
    # The server is gone now (its port is closed): the round's samples are withheld, not failed.
    with OpenAITestServer(respond=oracle, tool_parser=True) as model_server:
        probe_model = services.probe_model_add(
            name="scripted", backend="openai", base_url=model_server.base_url, model="fake-model", max_new_tokens=200
        )
        campaign = services.campaign_start(
            environment=environment, probe_model=probe_model, created_by=alice, rollouts=2, round_size=2, enqueue=False
        )
        item = campaign.items.order_by("task_version_id").first()
        before = failures_counted("kv")
        with pytest.raises(ServerUnavailable) as raised:
            services.round_generate(campaign_id=campaign.pk, task_version_ids=[item.task_version_id], round_index=0)
        assert raised.value.withheld == 2 and raised.value.stored == 0
        assert "MCP server kv" in str(raised.value) and "failed opening a session" in str(raised.value)
        assert not Rollout.objects.filter(campaign=campaign).exists()
        assert failures_counted("kv") == before + 2
        waiting = Campaign.objects.get(pk=campaign.pk)
        assert waiting.server_waiting_since is not None and "MCP server kv" in waiting.server_error
        # The server comes back on its port: the same round is asked for again and passes.
        with serve_mcp_kv(port=port):
            services.round_run(campaign_id=campaign.pk, task_version_ids=[item.task_version_id], round_index=0)
    rollouts = Rollout.objects.filter(campaign=campaign)
    assert rollouts.count() == 2 and set(rollouts.values_list("outcome", flat=True)) == {Outcome.PASS}
    assert Campaign.objects.get(pk=campaign.pk).server_waiting_since is None
