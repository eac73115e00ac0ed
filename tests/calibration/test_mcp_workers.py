"""MCP environments through real Celery workers: a real SDK server process, a scripted model server.

The oracle passes every task and the null policy fails every one; the MCP server killed in the
middle of a campaign costs retries, counted on /metrics, and never a wrong answer.
"""

import threading

import pytest
from django.db.models import Count

from calibration import services
from calibration.models import Calibration, Campaign, Outcome, Rollout
from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.services import environment_create
from tests.calibration.mcp_tasks import PLANS, mcp_task, null_policy, oracle
from tests.calibration.test_metrics import samples, total
from tests.factories import import_tasks
from tests.support.mcp_kv_server import free_port, start_process, stop_process
from tests.support.openai_server import OpenAITestServer
from tests.support.workers import flush_broker, running_worker, wait_for

pytestmark = [pytest.mark.workers]

ROLLOUTS = 2
# Retried rounds wait at most a second: the test waits for the server, not for back-off.
WORKER_ENV = {"PASSBAND_SERVER_RETRY_MAX_S": "1"}


def kv_environment(url, alice):
    server = mcp_server_register(name="kv", url=url, timeout_s=10, max_sessions=2)
    environment = environment_create(name="kv-tools", domain="tool use")
    environment_use_mcp_server(environment=environment, server=server)
    report = import_tasks(environment, alice, *[mcp_task(key) for key in PLANS], run_audits=True)
    assert report.ok and not report.audit_failures
    return environment


def start_campaign(environment, alice, base_url, name):
    probe_model = services.probe_model_add(
        name=name, backend="openai", base_url=base_url, model="fake-model", max_new_tokens=200
    )
    return services.campaign_start(
        environment=environment, probe_model=probe_model, created_by=alice, rollouts=ROLLOUTS, round_size=ROLLOUTS
    )


def wait_done(campaign, what):
    wait_for(lambda: Campaign.objects.get(pk=campaign.pk).status == Campaign.Status.DONE, timeout=180, what=what)


@pytest.mark.django_db(transaction=True)
def test_through_workers_the_oracle_passes_every_task_and_the_null_policy_fails_every_one(alice, tmp_path):
    flush_broker()
    process, url = start_process(log_path=tmp_path / "mcp.log")
    try:
        environment = kv_environment(url, alice)
        with (
            OpenAITestServer(respond=oracle, tool_parser=True) as oracle_server,
            OpenAITestServer(respond=null_policy, tool_parser=True) as null_server,
            running_worker(concurrency=2, extra_env=WORKER_ENV, log_path=tmp_path / "worker.log"),
        ):
            solved = start_campaign(environment, alice, oracle_server.base_url, "oracle")
            unsolved = start_campaign(environment, alice, null_server.base_url, "null")
            wait_done(solved, "the oracle's campaign")
            wait_done(unsolved, "the null policy's campaign")
    finally:
        stop_process(process)
    for campaign, outcome in ((solved, Outcome.PASS), (unsolved, Outcome.FAIL)):
        outcomes = list(Rollout.objects.filter(campaign=campaign).values_list("outcome", flat=True))
        assert len(outcomes) == ROLLOUTS * len(PLANS) and set(outcomes) == {outcome}
    passes = Calibration.objects.filter(probe_model__name="oracle").values_list("successes", flat=True)
    assert list(passes) == [ROLLOUTS] * len(PLANS)


@pytest.mark.django_db(transaction=True)
def test_the_server_killed_mid_campaign_costs_retries_counted_on_metrics_never_a_wrong_answer(
    client, staff, alice, settings, tmp_path
):
    flush_broker()
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    settings.PASSBAND_METRICS_DIR = str(metrics_dir)
    port = free_port()
    mcp = {"process": start_process(port=port, log_path=tmp_path / "mcp.log")[0]}
    killed = threading.Event()
    requests = {"count": 0}

    def oracle_that_kills_the_server(prompt_text, seed):
        # The model's fourth turn of the campaign: the MCP server dies while an episode is under way.
        requests["count"] += 1
        if requests["count"] == 4:
            stop_process(mcp["process"])
            killed.set()
        return oracle(prompt_text, seed)

    try:
        environment = kv_environment(f"http://127.0.0.1:{port}/mcp", alice)
        with (
            OpenAITestServer(respond=oracle_that_kills_the_server, tool_parser=True) as model_server,
            running_worker(
                concurrency=2,
                extra_env={**WORKER_ENV, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
                log_path=tmp_path / "worker.log",
            ),
        ):
            campaign = start_campaign(environment, alice, model_server.base_url, "oracle")
            wait_for(killed.is_set, timeout=120, what="the fourth model request")
            wait_for(
                lambda: Campaign.objects.get(pk=campaign.pk).server_waiting_since is not None,
                timeout=120,
                interval=0.1,
                what="the campaign to wait for its MCP server",
            )
            client.force_login(staff)
            # The campaign may also wait for the model server (a slow machine): wait for the failure to show
            # on /metrics rather than read it once.
            while_down = wait_for(
                lambda: (
                    (found := samples(client.get("/metrics").content.decode()))
                    and total(found, "passband_mcp_failures_total", server="kv") >= 1
                    and found
                ),
                timeout=120,
                what="the server's failure on /metrics",
            )
            mcp["process"] = start_process(port=port, log_path=tmp_path / "mcp.log")[0]
            wait_done(campaign, "the campaign to finish once the MCP server is back")
    finally:
        stop_process(mcp["process"])
    assert total(while_down, "passband_mcp_failures_total", server="kv") >= 1
    reasons = {
        dict(labels)["reason"] for name, labels in while_down if name == "passband_mcp_failures_total" and labels
    }
    assert reasons <= {"disconnected", "unreachable", "server_error", "timeout"}
    per_task = (
        Rollout.objects.filter(campaign=campaign)
        .values("task_version")
        .annotate(n=Count("id"), distinct=Count("sample_index", distinct=True))
    )
    assert sorted((row["n"], row["distinct"]) for row in per_task) == [(ROLLOUTS, ROLLOUTS)] * len(PLANS)
    # Every attempt that was stored is the oracle's, and passed: the outage made no wrong answers.
    assert set(Rollout.objects.filter(campaign=campaign).values_list("outcome", flat=True)) == {Outcome.PASS}
    calibrations = Calibration.objects.filter(probe_model__name="oracle")
    assert sorted((c.attempts, c.successes) for c in calibrations) == [(ROLLOUTS, ROLLOUTS)] * len(PLANS)
    assert Campaign.objects.get(pk=campaign.pk).server_waiting_since is None
    # The environment's page sees the outage too: failed episodes with the server's error, beside the ones that ran.
    from calibration.selectors import environment_health

    (health,) = environment_health(environment=environment)
    assert health["world"] == "mcp:kv" and health["failures"] >= 1
    assert health["episodes"] == health["failures"] + Rollout.objects.filter(campaign=campaign).count()
    assert "kv" in health["last_error"] and health["reset_ms_mean"] > 0
