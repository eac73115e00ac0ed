"""MCP environments through real Celery workers: a real SDK server process, a scripted model server.

The oracle passes every task and the null policy fails every one; the MCP server killed in the
middle of a campaign costs retries, counted on /metrics, and never a wrong answer.
"""

import pytest

from curation.mcp_servers import environment_use_mcp_server, mcp_server_register
from curation.services import environment_create
from tests.calibration.mcp_tasks import PLANS, mcp_task, null_policy, oracle
from tests.factories import import_tasks
from tests.support.mcp_kv_server import start_process, stop_process
from tests.support.server_campaigns import oracle_and_null_through_workers, server_killed_mid_campaign
from tests.support.workers import flush_broker

pytestmark = [pytest.mark.workers]


def kv_environment(url, alice):
    server = mcp_server_register(name="kv", url=url, timeout_s=10, max_sessions=2)
    environment = environment_create(name="kv-tools", domain="tool use")
    environment_use_mcp_server(environment=environment, server=server)
    report = import_tasks(environment, alice, *[mcp_task(key) for key in PLANS], run_audits=True)
    assert report.ok and not report.audit_failures
    return environment


@pytest.mark.django_db(transaction=True)
def test_through_workers_the_oracle_passes_every_task_and_the_null_policy_fails_every_one(alice, tmp_path):
    flush_broker()
    process, url = start_process(log_path=tmp_path / "mcp.log")
    try:
        environment = kv_environment(url, alice)
        oracle_and_null_through_workers(
            environment, alice, tmp_path, oracle=oracle, null_policy=null_policy, tasks=len(PLANS)
        )
    finally:
        stop_process(process)


@pytest.mark.django_db(transaction=True)
def test_the_server_killed_mid_campaign_costs_retries_counted_on_metrics_never_a_wrong_answer(
    staff, alice, settings, tmp_path
):
    flush_broker()
    server_killed_mid_campaign(
        staff,
        alice,
        settings,
        tmp_path,
        start_server=lambda port: start_process(port=port, log_path=tmp_path / "mcp.log")[0],
        environment_at=lambda port: kv_environment(f"http://127.0.0.1:{port}/mcp", alice),
        oracle=oracle,
        # The model's fourth turn of the campaign: an episode is under way.
        kill_at_request=4,
        server="kv",
        labels={"server": "kv"},
        world="mcp:kv",
        tasks=len(PLANS),
    )
